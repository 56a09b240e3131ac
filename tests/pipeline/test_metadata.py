from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Any

import pytest

from docingest.pipeline.document import Block, DocumentFormat, ExtractedDocument
from docingest.pipeline.errors import InvalidMetadata
from docingest.pipeline.metadata import (
    RESERVED_KEYS,
    USER_DESCRIPTIVE_KEYS,
    TextTally,
    content_metadata,
    count_words,
    file_metadata,
    guess_language,
    ocr_of_pages,
    ocr_summary,
    parse_user_metadata,
    validate_user_metadata,
)

LIMIT = 16 * 1024


def automatic_metadata(
    data: bytes, *, filename: str, document: ExtractedDocument, text: str
) -> dict[str, Any]:
    """The automatic metadata of `document` whose full text is `text` (one block of it)."""
    tally = TextTally()
    tally.add([Block(text)])
    file = file_metadata(data, filename=filename, format=str(document.format))
    return {**file, **content_metadata(document, tally)}


def test_automatic_metadata_from_document() -> None:
    document = ExtractedDocument(
        format=DocumentFormat.DOCX,
        blocks=[Block("Quarterly report"), Block("Revenue grew in every region this year.")],
        title="Quarterly report",
        author="Ana Lima",
        created=datetime(2024, 3, 1, 12, 0, tzinfo=UTC),
        modified=datetime(2024, 3, 2, 8, 30),  # naive: taken as UTC
    )
    data = b"fake bytes"
    meta = automatic_metadata(data, filename="q1.docx", document=document, text="x y z")
    # sha256 of b"fake bytes", as computed by `printf 'fake bytes' | sha256sum`
    assert meta["sha256"] == "b625ed49d024261acc1f167b97cb36eade98bdcac7279f743bf55bf62d8c5108"
    assert meta["filename"] == "q1.docx" and meta["format"] == "docx"
    assert meta["size_bytes"] == len(data)
    assert meta["words"] == 3 and meta["characters"] == 5
    assert meta["title"] == "Quarterly report" and meta["author"] == "Ana Lima"
    assert meta["created"] == "2024-03-01T12:00:00Z"
    assert meta["modified"] == "2024-03-02T08:30:00Z"
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z", meta["ingested_at"])


def test_declared_language_wins_over_guess() -> None:
    document = ExtractedDocument(format=DocumentFormat.HTML, blocks=[], extra={"language": "pt-BR"})
    text = "This text is plainly written in the English language, for a test."
    meta = automatic_metadata(b"", filename="a.html", document=document, text=text)
    assert meta["language"] == "pt"


def test_language_is_guessed_from_text() -> None:
    assert (
        guess_language("Die Dokumente werden in kleine Abschnitte zerlegt und gespeichert.") == "de"
    )
    assert guess_language("Les documents sont découpés en petits morceaux puis indexés.") == "fr"
    assert guess_language("ok") is None


def test_word_count_counts_cjk_characters() -> None:
    assert count_words("hello, world — it's 2024") == 5
    assert count_words("日本語の文") == 5


def test_user_metadata_accepts_the_documented_types() -> None:
    raw = {"department": "legal", "year": 2024, "score": 0.5, "draft": False, "tags": ["a", "b"]}
    assert validate_user_metadata(raw, max_bytes=LIMIT) == raw
    assert parse_user_metadata('{"department": "legal"}', max_bytes=LIMIT) == {
        "department": "legal"
    }
    assert parse_user_metadata(None, max_bytes=LIMIT) == {}
    assert parse_user_metadata("  ", max_bytes=LIMIT) == {}


@pytest.mark.parametrize(
    ("raw", "fragment"),
    [
        ("[1, 2]", "must be a JSON object"),
        ('"legal"', "must be a JSON object"),
        ("{not json", "not valid JSON"),
        ('{"a\x01": 1}', "Invalid control character at position 3."),  # not "at at"
        ('{"sha256": "x"}', "reserved"),
        ('{"document_id": "x"}', "reserved"),
        ('{"nested": {"a": 1}}', "string, number, boolean or list of strings"),
        ('{"tags": [1, 2]}', "list of at most"),
        ('{"bad key": 1}', "invalid"),
        ('{"": 1}', "invalid"),
        ('{"n": NaN}', "finite"),
        ('{"n": null}', "not NoneType"),
        ('{"n": 9223372036854775808}', "64-bit integer range"),
        ('{"n": -9223372036854775809}', "64-bit integer range"),
        ('{"team": "\\ud800"}', "lone surrogate"),  # json.loads makes it; UTF-8 cannot
        ('{"tags": ["a", "\\udfff"]}', "lone surrogate"),
        ('{"team\\n": 1}', "invalid"),  # `$` matched before a final newline
        ("[" * 5000 + "]" * 5000, "nested too deeply"),
    ],
)
def test_user_metadata_rejections_say_what_is_wrong(raw: str, fragment: str) -> None:
    with pytest.raises(InvalidMetadata) as info:
        parse_user_metadata(raw, max_bytes=LIMIT)
    assert fragment in info.value.message
    assert info.value.code == "invalid_metadata"


def test_user_metadata_size_is_bounded() -> None:
    with pytest.raises(InvalidMetadata, match="limit"):
        validate_user_metadata({f"k{i}": "x" * 100 for i in range(200)}, max_bytes=LIMIT)


def test_every_automatic_key_is_reserved() -> None:
    document = ExtractedDocument(format=DocumentFormat.TXT, blocks=[])
    meta = automatic_metadata(b"", filename="a.txt", document=document, text="")
    assert set(meta) <= RESERVED_KEYS | USER_DESCRIPTIVE_KEYS


def test_author_is_user_metadata_as_the_contract_says() -> None:
    """The HTTP API names `author` (with department, doc_type, tags) as user metadata."""
    parsed = parse_user_metadata(
        '{"department": "legal", "author": "Ana Lima", "doc_type": "memo", "tags": ["a"]}',
        max_bytes=16 * 1024,
    )
    assert parsed["author"] == "Ana Lima"


OCR_RECORD = {"pages": [2, 3, 7], "page_confidence": [0.9, 0.7, None], "confidence": 0.82}


def test_a_chunk_gets_the_ocr_pages_it_spans_and_their_mean_confidence() -> None:
    assert ocr_of_pages(OCR_RECORD, 1, 3) == {"pages": [2, 3], "confidence": 0.8}
    assert ocr_of_pages(OCR_RECORD, 3, None) == {"pages": [3], "confidence": 0.7}
    assert ocr_of_pages(OCR_RECORD, 7, 7) == {"pages": [7], "confidence": None}
    assert ocr_of_pages(OCR_RECORD, 4, 6) is None
    assert ocr_of_pages(OCR_RECORD, None, None) is None
    assert ocr_of_pages(None, 1, 3) is None


def test_the_document_ocr_summary_drops_the_per_page_list() -> None:
    assert ocr_summary(OCR_RECORD) == {"pages": [2, 3, 7], "confidence": 0.82}
    assert ocr_summary(None) is None
    assert ocr_summary({"pages": [], "page_confidence": [], "confidence": None}) is None
    assert "ocr" in RESERVED_KEYS
