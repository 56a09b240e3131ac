"""Document metadata: what the file says about itself plus what the user attached to it.

Automatic fields are computed here; user metadata is validated here (types, size, reserved
keys) so every entry point (HTTP upload, command line) applies the same rules.
"""

from __future__ import annotations

import hashlib
import json
import math
import mmap
import re
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import cache
from typing import Any

from docingest.pipeline.document import BLOCK_SEPARATOR, Block, ExtractedDocument
from docingest.pipeline.errors import InvalidMetadata

# Keys docingest computes itself, on documents or on every stored chunk; a user may not set
# them. Descriptive fields a file may also carry (title, author, language, created, modified)
# stay open: the API contract names `author` as user metadata, and user metadata is stored
# apart (payload `metadata.*`), so a user's `author` never overwrites the file's own.
USER_DESCRIPTIVE_KEYS = frozenset({"title", "author", "language", "created", "modified"})
RESERVED_KEYS = frozenset(
    {
        "filename", "format", "size_bytes", "sha256", "content_sha256", "pages", "words",
        "characters", "ingested_at", "document_id", "index", "version", "chunk_index", "text",
        "start", "end", "page_start", "page_end", "headings", "text_hash", "job_id", "metadata",
        "extra", "ocr",
    }
)  # fmt: skip
METADATA_KEY = re.compile(r"[A-Za-z][A-Za-z0-9_.-]{0,63}")
"""A user metadata key, to `fullmatch`: in metadata, filters and an index's `metadata_schema`."""
MAX_LIST_ITEMS = 100
MAX_STRING_CHARS = 2000
INT64 = range(-(2**63), 2**63)
"""Integers metadata and filters may hold: Qdrant's integer payloads are 64-bit (Edge's binding
refuses a larger filter value with `OverflowError`), so a larger one could never be matched."""
LONE_SURROGATE = (
    "holds a lone surrogate (such as \\ud800), which is no Unicode character; send UTF-8 text"
)
"""Why a string is refused that `is_text` rejects, for messages."""


def is_text(value: str) -> bool:
    """Whether `value` is Unicode text that UTF-8 can encode. JSON's "\\ud800" decodes to a
    lone surrogate, which is not: Qdrant Edge's binding and every UTF-8 encoding (the metadata
    size, a JSON answer) fail on it, so metadata and filters refuse it where they are
    validated."""
    try:
        value.encode()
    except UnicodeEncodeError:
        return False
    return True


# A word is a run of letters/digits, except that CJK ideographs, kana and hangul syllables
# count one each: those scripts do not separate words with spaces.
_WORD = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af]|[^\W_]+")
_LANGUAGE_SAMPLE_CHARS = 5000


_HASH_STEP = 64 * 1024 * 1024


def sha256_hex(data: bytes | mmap.mmap) -> str:
    """The SHA-256 of `data`; a memory-mapped upload is hashed a window at a time, each
    window's pages released after (it stays on disk, not in this process's memory)."""
    if not isinstance(data, mmap.mmap):
        return hashlib.sha256(data).hexdigest()
    digest = hashlib.sha256()
    view = memoryview(data)
    try:
        for start in range(0, len(data), _HASH_STEP):
            digest.update(view[start : start + _HASH_STEP])
            end = min(len(data), start + _HASH_STEP)
            data.madvise(mmap.MADV_DONTNEED, start, (end - start) // mmap.PAGESIZE * mmap.PAGESIZE)
    finally:
        view.release()
    return digest.hexdigest()


def count_words(text: str) -> int:
    return sum(1 for _ in _WORD.finditer(text))


@cache
def _language_identifier() -> Any:
    # py3langid ships its model inside the wheel (no download) and classifies quickly, but
    # loading the model is slow, so it happens once, on first use.
    from py3langid.langid import MODEL_FILE, LanguageIdentifier

    return LanguageIdentifier.from_model_file(MODEL_FILE, norm_probs=True)


def guess_language(text: str) -> str | None:
    """Return an ISO 639-1 code for the text's main language, or None when unsure."""
    sample = text[:_LANGUAGE_SAMPLE_CHARS]
    if count_words(sample) < 5:
        return None
    language, probability = _language_identifier().classify(sample)
    return str(language) if probability >= 0.5 else None


def _iso(moment: datetime | None) -> str | None:
    if moment is None:
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC).isoformat().replace("+00:00", "Z")


def now_iso() -> str:
    """The current time as an RFC 3339 UTC string."""
    return _iso(datetime.now(UTC)) or ""


def file_metadata(data: bytes | mmap.mmap, *, filename: str, format: str) -> dict[str, Any]:
    """The automatic metadata known before extraction: the file's name, format, size, hash
    and the time of ingestion."""
    return {
        "filename": filename,
        "format": format,
        "size_bytes": len(data),
        "sha256": sha256_hex(data),
        "ingested_at": now_iso(),
    }


CONTENT_KEYS = (
    "pages", "words", "characters", "title", "author", "language", "created", "modified", "ocr",
)  # fmt: skip
"""The automatic metadata known only once the whole document is extracted."""


def content_metadata(document: ExtractedDocument, text: TextTally) -> dict[str, Any]:
    """The automatic metadata of the extracted `document`, whose full text `text` counted
    (`CONTENT_KEYS`)."""
    declared_language = document.extra.get("language")
    language = (
        declared_language.split("-")[0].lower()
        if isinstance(declared_language, str) and declared_language
        else guess_language(text.sample)
    )
    return {
        "pages": document.pages,
        "words": text.words,
        "characters": text.characters,
        "title": document.title,
        "author": document.author,
        "language": language,
        "created": _iso(document.created),
        "modified": _iso(document.modified),
        "ocr": document.extra.get("ocr"),
    }


@dataclass(slots=True)
class TextTally:
    """What the metadata needs of a document's full text, counted block by block as the
    blocks are extracted: the words, the characters of the joined text, and its opening
    (for the language guess). Words never span two blocks: a blank line separates them."""

    words: int = 0
    characters: int = 0
    sample: str = ""
    blocks: int = 0

    def add(self, blocks: Iterable[Block]) -> None:
        for block in blocks:
            separator = BLOCK_SEPARATOR if self.blocks else ""
            self.blocks += 1
            self.words += count_words(block.text)
            self.characters += len(separator) + len(block.text)
            if len(self.sample) < _LANGUAGE_SAMPLE_CHARS:
                self.sample = (self.sample + separator + block.text)[:_LANGUAGE_SAMPLE_CHARS]


def ocr_summary(ocr: dict[str, Any] | None) -> dict[str, Any] | None:
    """A document's OCR record (`content_metadata()["ocr"]`) as stored and served: the
    pages read by OCR and their word-weighted mean confidence (0-1); None without OCR."""
    if not ocr or not ocr.get("pages"):
        return None
    return {"pages": list(ocr["pages"]), "confidence": ocr.get("confidence")}


def ocr_of_pages(ocr: dict[str, Any] | None, first: int | None, last: int | None) -> Any:
    """The OCR'd pages among `first`..`last` with their mean page confidence, for one chunk;
    None when none of them was OCR'd."""
    if not ocr or first is None:
        return None
    last = first if last is None else last
    pairs = [
        (page, confidence)
        for page, confidence in zip(ocr["pages"], ocr["page_confidence"], strict=True)
        if first <= page <= last
    ]
    if not pairs:
        return None
    known = [confidence for _, confidence in pairs if confidence is not None]
    mean = round(sum(known) / len(known), 4) if known else None
    return {"pages": [page for page, _ in pairs], "confidence": mean}


def _check_value(key: str, value: Any) -> Any:
    if isinstance(value, bool):
        return value
    if isinstance(value, str):
        if len(value) > MAX_STRING_CHARS:
            raise InvalidMetadata(
                f"Metadata value of '{key}' is longer than {MAX_STRING_CHARS} characters."
            )
        if not is_text(value):
            raise InvalidMetadata(f"Metadata value of '{key}' {LONE_SURROGATE}.")
        return value
    if isinstance(value, int):
        if value not in INT64:
            raise InvalidMetadata(
                f"Metadata value of '{key}' is outside the 64-bit integer range "
                f"({INT64.start} to {INT64.stop - 1})."
            )
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            raise InvalidMetadata(f"Metadata value of '{key}' must be a finite number.")
        return value
    if isinstance(value, list):
        if len(value) > MAX_LIST_ITEMS or not all(isinstance(item, str) for item in value):
            raise InvalidMetadata(
                f"Metadata value of '{key}' must be a list of at most {MAX_LIST_ITEMS} strings."
            )
        for item in value:
            _check_value(key, item)
        return list(value)
    raise InvalidMetadata(
        f"Metadata value of '{key}' must be a string, number, boolean or list of strings, "
        f"not {type(value).__name__}."
    )


def validate_user_metadata(raw: Any, *, max_bytes: int) -> dict[str, Any]:
    """Return `raw` as clean user metadata, or raise `InvalidMetadata` saying what is wrong."""
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise InvalidMetadata('Metadata must be a JSON object, such as {"department": "legal"}.')
    as_json = json.dumps(raw, ensure_ascii=False, separators=(",", ":"))
    size = len(as_json.encode(errors="surrogatepass"))  # a lone surrogate is refused below
    if size > max_bytes:
        raise InvalidMetadata(f"Metadata is {size} bytes as JSON; the limit is {max_bytes}.")
    clean: dict[str, Any] = {}
    for key, value in raw.items():
        if not isinstance(key, str) or not METADATA_KEY.fullmatch(key):
            raise InvalidMetadata(
                f"Metadata key {key!r} is invalid: use 1-64 letters, digits, '_', '-' or '.', "
                "starting with a letter."
            )
        if key in RESERVED_KEYS:
            raise InvalidMetadata(f"Metadata key '{key}' is reserved by docingest; rename it.")
        clean[key] = _check_value(key, value)
    return clean


def parse_user_metadata(raw_json: str | None, *, max_bytes: int) -> dict[str, Any]:
    """Parse a JSON text of user metadata (as sent in a form field) and validate it."""
    if raw_json is None or not raw_json.strip():
        return {}
    if len(raw_json.encode(errors="surrogatepass")) > max_bytes * 2:
        raise InvalidMetadata(f"Metadata is larger than the limit of {max_bytes} bytes.")
    try:
        raw = json.loads(raw_json)
    except RecursionError as exc:  # arrays or objects nested thousands deep
        raise InvalidMetadata("Metadata is nested too deeply to be read as JSON.") from exc
    except json.JSONDecodeError as exc:
        # Some of json's messages end in "at" ("Invalid control character at"), written to be
        # followed by the position.
        problem = exc.msg.removesuffix(" at")
        raise InvalidMetadata(
            f"Metadata is not valid JSON: {problem} at position {exc.pos}."
        ) from exc
    return validate_user_metadata(raw, max_bytes=max_bytes)
