from __future__ import annotations

from pathlib import Path

import pytest

from docingest.pipeline.detect import detect
from docingest.pipeline.document import BlockKind, DocumentFormat
from docingest.pipeline.extract.text import extract_text, split_paragraphs
from tests.support.paths import CORPUS_DIR

TEXT_FILES = sorted(path.name for path in (CORPUS_DIR / "txt").iterdir() if path.stat().st_size)


def _extract(corpus_dir: Path, name: str) -> str:
    data = (corpus_dir / "txt" / name).read_bytes()
    document = extract_text(data, encoding=detect(data, filename=name).encoding)
    assert document.format is DocumentFormat.TXT
    assert all(block.kind is BlockKind.PARAGRAPH and block.text for block in document.blocks)
    return "\n\n".join(block.text for block in document.blocks)


@pytest.mark.parametrize(
    ("name", "phrase"),
    [
        ("cp1251-russian.txt", "В гимназии он не был в числе первых учеников"),
        # 0x85 is an ellipsis in windows-1252 (a C1 control in latin-1).
        ("cp1252-dutch-anna-karenina.txt", "dat zij al…. Ach, het moest alles zoo komen!"),
        ("shift_jis-gutenberg-luther-catechism-ja.txt", "マルチン・ルターの小信仰問答書"),
        ("shift_jis-gutenberg-luther-catechism-ja.txt", "他の神々を神としてはいけません。"),
        ("utf16le-bom-subtitles.txt", "About 2 months ago I found myself on"),
        ("latin1-finnish-sibelius.txt", "Vielä ehdit perehtyä Sibeliuksen elämään Ateneumissa"),
        ("latin1-french-visa.txt", "dépend à la fois de la durée et des motifs du séjour envisagé"),
    ],
)
def test_legacy_encodings_decode_to_the_right_characters(
    corpus_dir: Path, name: str, phrase: str
) -> None:
    assert phrase in _extract(corpus_dir, name)


def test_encoding_is_recorded_and_found_again_when_not_given(corpus_dir: Path) -> None:
    data = (corpus_dir / "txt/utf16le-bom-subtitles.txt").read_bytes()
    document = extract_text(data, encoding=None)
    assert document.extra == {"encoding": "utf-16-le"}
    assert document.blocks[0].text == (
        "1\n00:00:06,500 --> 00:00:09,000\nAbout 2 months ago I found myself on\n"
        "the comment section of YouTube"
    )
    assert not document.blocks[0].text.startswith("\ufeff")


def test_rfc_paragraph_keeps_its_lines_without_the_margin(corpus_dir: Path) -> None:
    text = _extract(corpus_dir, "rfc2616-http11.txt")
    assert (
        "The Hypertext Transfer Protocol (HTTP) is an application-level\n"
        "protocol for distributed, collaborative, hypermedia information\n"
        "systems. It is a generic, stateless, protocol"
    ) in text


def test_form_feeds_become_paragraph_breaks(corpus_dir: Path) -> None:
    data = (corpus_dir / "txt/rfc6455-websocket.txt").read_bytes()
    assert data.count(b"\f") == 71
    blocks = [block.text for block in extract_text(data, encoding="utf-8").blocks]
    assert not any("\f" in block for block in blocks)
    page_end = blocks.index(
        "Fette & Melnikov             Standards Track                    [Page 1]"
    )
    assert blocks[page_end + 1] == (
        "RFC 6455                 The WebSocket Protocol            December 2011"
    )


@pytest.mark.parametrize("name", TEXT_FILES)
def test_no_replacement_characters_in_corpus_text(corpus_dir: Path, name: str) -> None:
    # wikipedia-iwan-roberts-norwich.txt holds mojibake, but as valid characters, not U+FFFD.
    assert "\ufffd" not in _extract(corpus_dir, name)


def test_paragraph_splitting_normalises_breaks() -> None:
    text = "  a\r\n    b  \r\n\r\n \t \n  c\r\fd\n\n\ne\u2029f"
    assert split_paragraphs(text.replace("\r\n", "\n").replace("\r", "\n")) == [
        "a\n  b",
        "c",
        "d",
        "e",
        "f",
    ]
    document = extract_text(b"one\r\ntwo\rthree\r\n\r\nfour", encoding="ascii")
    assert [block.text for block in document.blocks] == ["one\ntwo\nthree", "four"]
