from __future__ import annotations

import codecs
import random

import pytest

from docingest.pipeline.detect.textcodec import control_ratio, decode_text

POLISH = "Zażółć gęślą jaźń. Łódź jest dużym miastem w Polsce, które leży w centrum kraju. "
GERMAN = "Die Größe der Straße überrascht Jürgen. Schöne Grüße aus München und Köln. "
FRENCH = "Le séjour envisagé dépend à la fois de la durée et des motifs. Très bien, garçon. "
RUSSIAN = "В гимназии он не был в числе первых учеников, но учился хорошо. "


@pytest.mark.parametrize(
    ("text", "encoding"),
    [
        (GERMAN * 10, "cp1252"),
        (FRENCH * 10, "latin-1"),
        (POLISH * 10, "cp1250"),
        (RUSSIAN * 10, "cp1251"),
        (RUSSIAN * 10, "koi8-r"),
        ("日本語の文章です。東京は大きな都市です。" * 10, "shift_jis"),
        ("中文文本的编码检测。北京是中国的首都。" * 10, "gb18030"),
    ],
)
def test_legacy_encodings_round_trip(text: str, encoding: str) -> None:
    decoded = decode_text(text.encode(encoding))
    assert decoded is not None
    assert decoded.text == text


@pytest.mark.parametrize("encoding", ["utf-8-sig", "utf-16", "utf-16-le", "utf-16-be", "utf-32"])
def test_unicode_encodings_with_and_without_bom(encoding: str) -> None:
    text = GERMAN + RUSSIAN
    decoded = decode_text(text.encode(encoding))
    assert decoded is not None and decoded.text == text


def test_bom_wins_over_a_declared_encoding() -> None:
    data = codecs.BOM_UTF16_LE + GERMAN.encode("utf-16-le")
    decoded = decode_text(data, declared="utf-8")
    assert decoded is not None
    assert decoded.text == GERMAN and decoded.had_bom and decoded.encoding == "utf-16-le"


def test_declared_encoding_used_when_utf8_fails() -> None:
    decoded = decode_text((RUSSIAN * 3).encode("koi8-r"), declared="koi8-r")
    assert decoded is not None and decoded.encoding == "koi8-r"


def test_random_bytes_are_not_text() -> None:
    data = random.Random(0).randbytes(4096)
    decoded = decode_text(data)
    assert decoded is None or control_ratio(decoded.text) > 0.01
