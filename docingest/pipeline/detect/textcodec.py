"""Turn the bytes of a text document (TXT, Markdown, HTML) into str, whatever the encoding.

Order of evidence: a byte-order mark; BOM-less UTF-16 (a zero in every other byte); strict
UTF-8; an encoding the document declares, if the bytes decode under it; charset-normalizer's
best guess for legacy 8-bit and CJK encodings.

Single-byte Latin code pages are ambiguous (the same bytes are valid Finnish in windows-1252,
HP Roman-8 and DOS cp775), and charset-normalizer often ranks a rare one first. When its guess
is such a code page, we re-decide among the encodings people actually wrote Latin-script text
in, preferring the one whose non-ASCII characters are letters, with windows-1252 first on ties:
the same default browsers use for undeclared Western pages.
"""

from __future__ import annotations

import codecs
from dataclasses import dataclass

from charset_normalizer import from_bytes

_BOMS: tuple[tuple[bytes, str], ...] = (
    (codecs.BOM_UTF32_LE, "utf-32-le"),  # before UTF-16 LE: it starts with the same bytes
    (codecs.BOM_UTF32_BE, "utf-32-be"),
    (codecs.BOM_UTF8, "utf-8"),
    (codecs.BOM_UTF16_LE, "utf-16-le"),
    (codecs.BOM_UTF16_BE, "utf-16-be"),
)

# Control characters that never occur in real text; their presence means binary data.
_BINARY_CONTROLS = frozenset(range(0x00, 0x09)) | {0x0E, 0x0F} | frozenset(range(0x10, 0x1A))
_BINARY_CONTROLS |= {0x1C, 0x1D, 0x1E, 0x1F, 0x7F}


# Guesses that mean "some Latin-script single-byte code page": re-decided by `_pick_latin`.
_LATIN_GUESSES = frozenset(
    {
        "cp1250", "cp1252", "cp1257", "latin_1", "iso8859_2", "iso8859_3", "iso8859_4",
        "iso8859_9", "iso8859_10", "iso8859_13", "iso8859_14", "iso8859_15", "iso8859_16",
        "cp437", "cp775", "cp850", "cp852", "cp858", "cp1006", "cp1125", "hp_roman8",
        "mac_roman", "mac_iceland", "mac_latin2", "mac_turkish",
    }
)  # fmt: skip
# Where Latin-script legacy text comes from in practice, most common first.
_LATIN_CANDIDATES = ("cp1252", "cp1250", "iso8859_15", "cp1257", "iso8859_2")


@dataclass(frozen=True, slots=True)
class DecodedText:
    text: str
    encoding: str
    had_bom: bool = False


def bom_encoding(data: bytes) -> tuple[str, int] | None:
    """Return (encoding, BOM length) if `data` starts with a byte-order mark."""
    for bom, name in _BOMS:
        if data.startswith(bom):
            return name, len(bom)
    return None


def _utf16_without_bom(data: bytes) -> str | None:
    sample = data[:4096]
    if len(sample) < 4:
        return None
    even_zero = sample[0::2].count(0) / len(sample[0::2])
    odd_zero = sample[1::2].count(0) / len(sample[1::2])
    if odd_zero > 0.3 and even_zero < 0.05:
        return "utf-16-le"
    if even_zero > 0.3 and odd_zero < 0.05:
        return "utf-16-be"
    return None


def _try(data: bytes, encoding: str) -> str | None:
    try:
        return data.decode(encoding)
    except (UnicodeDecodeError, LookupError):
        return None


def _letter_share(text: str) -> float:
    high = [ch for ch in text if ord(ch) > 0x7F]
    if not high:
        return 1.0
    return sum(1 for ch in high if ch.isalpha()) / len(high)


def _pick_latin(sample: bytes) -> str | None:
    best: tuple[float, str] | None = None
    for encoding in _LATIN_CANDIDATES:
        text = _try(sample, encoding)
        if text is None:
            continue
        share = _letter_share(text)
        if best is None or share > best[0]:
            best = (share, encoding)
    return best[1] if best else None


def control_ratio(text: str) -> float:
    """Share of characters in `text` that are control characters no real text contains."""
    if not text:
        return 0.0
    sample = text[:65536]
    bad = sum(1 for ch in sample if ord(ch) in _BINARY_CONTROLS)
    return bad / len(sample)


def decode_text(data: bytes, *, declared: str | None = None) -> DecodedText | None:
    """Decode `data`, or return None when it is not text in any encoding we can tell.

    `declared` is an encoding the document names for itself (an HTML `<meta charset>`);
    it is trusted only after BOM and strict UTF-8, and only if the bytes decode under it.
    """
    if (bom := bom_encoding(data)) is not None:
        name, size = bom
        text = _try(data[size:], name)
        if text is not None:
            return DecodedText(text, name, had_bom=True)
    # BOM-less UTF-16 first: ASCII in UTF-16 (a zero byte beside every character) is also
    # valid UTF-8, and real UTF-8 text has no zero bytes.
    if (utf16 := _utf16_without_bom(data)) is not None and (text := _try(data, utf16)):
        return DecodedText(text, utf16)
    text = _try(data, "utf-8")
    if text is not None:
        return DecodedText(text, "utf-8")
    if declared and (text := _try(data, declared)) is not None:
        return DecodedText(text, codecs.lookup(declared).name)
    sample = data[:1_000_000]
    best = from_bytes(sample).best() if data else None
    if best is None:
        return None
    encoding = best.encoding
    if encoding in _LATIN_GUESSES:
        encoding = _pick_latin(sample) or encoding
    text = _try(data, encoding)
    if text is None:  # the guess held for the sample only; decode the rest leniently
        text = data.decode(encoding, errors="replace")
    return DecodedText(text, codecs.lookup(encoding).name)
