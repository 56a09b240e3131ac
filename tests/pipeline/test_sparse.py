"""Keyword term vectors: analysis, stable indexes, BM25 weights."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from docingest.pipeline import sparse
from docingest.pipeline.sparse import (
    AVG_LEN,
    K1,
    STOP_WORDS,
    SparseTerms,
    analyze,
    average_length,
    encode_document,
    encode_query,
    term_index,
)
from tests.support.paths import REPO_DIR

REPO_ROOT = REPO_DIR


def weights(terms: SparseTerms) -> dict[int, float]:
    return dict(zip(terms.indices, terms.values, strict=True))


def fillers(count: int) -> list[str]:
    """Distinct plain words (letters only, so each is one term)."""
    return ["zq" + "".join(chr(97 + int(digit)) for digit in str(i)) for i in range(count)]


def test_term_index_is_the_same_in_another_process() -> None:
    words = ["running", "ERR_TLS_CERT_ALTNAME_INVALID", "東京", "ünïcödé"]
    script = (
        "import json, sys; from docingest.pipeline.sparse import term_index, encode_document; "
        "words = json.loads(sys.argv[1]); "
        "indices = [term_index(w) for w in words]; "
        "print(json.dumps([indices, encode_document(' '.join(words)).indices]))"
    )
    outputs = [
        subprocess.run(
            [sys.executable, "-c", script, json.dumps(words)],
            capture_output=True,
            text=True,
            check=True,
            env={**os.environ, "PYTHONHASHSEED": seed},  # str hashes differ per seed
            cwd=REPO_ROOT,
        ).stdout
        for seed in ("1", "2")
    ]
    assert outputs[0] == outputs[1]
    here = [[term_index(w) for w in words], encode_document(" ".join(words)).indices]
    assert json.loads(outputs[0]) == here


def test_term_index_is_31_bit() -> None:
    assert all(0 <= term_index(word) < 2**31 for word in ("a", "b", "running", "x" * 1000))


def test_inflections_share_a_term() -> None:
    assert analyze("running runs run") == ["run", "run", "run"]
    assert encode_query("running").indices == encode_query("runs").indices


def test_case_and_compatibility_forms_fold() -> None:
    # NFKC turns full-width letters into ASCII; casefold turns ß into ss.
    assert analyze("ｆｕｌｌｗｉｄｔｈ") == analyze("fullwidth")
    assert analyze("straße") == analyze("STRASS") == ["strass"]
    assert analyze("STRASSE") == ["strasse", "strass"]  # ALL CAPS: exact form and stem


def test_identifiers_are_kept_whole_and_split() -> None:
    terms = analyze("Failed with ERR_TLS_CERT_ALTNAME_INVALID and E1234")
    assert "err_tls_cert_altname_invalid" in terms
    assert {"tls", "cert", "invalid"} <= set(terms)
    assert "e1234" in terms
    code = encode_query("err_tls_cert_altname_invalid")
    assert term_index("err_tls_cert_altname_invalid") in code.indices
    assert set(code.indices) <= set(encode_document("ERR_TLS_CERT_ALTNAME_INVALID").indices)


def test_all_caps_and_camel_case_keep_their_exact_form() -> None:
    assert analyze("HTTPServer") == ["httpserver", "http", "server"]
    assert analyze("CELLS") == ["cells", "cell"]  # exact and stemmed: "cells" still matches
    assert set(encode_query("cells").indices) <= set(encode_document("CELLS").indices)


def test_stop_words_and_possessives_are_dropped() -> None:
    assert analyze("The cat's toys are in the box") == ["cat", "toy", "box"]
    assert "the" in STOP_WORDS


def test_cjk_runs_become_bigrams() -> None:
    assert analyze("東京都") == ["東京", "京都"]
    assert analyze("한국어") == ["한국", "국어"]
    assert analyze("猫") == ["猫"]
    assert analyze("東京 Tokyo") == ["東京", "tokyo"]


def test_cjk_and_latin_in_one_run_split_where_the_script_changes() -> None:
    assert analyze("東京Tower2020年") == ["東京", "tower2020", "tower", "2020", "年"]


def test_remembered_words_analyse_as_the_first_time(monkeypatch: pytest.MonkeyPatch) -> None:
    text = "Running QdrantClient's ERR_TLS_CERT in 東京都, running again: E1234 HTTPS."
    monkeypatch.setattr(sparse, "_TERMS_OF", {})
    monkeypatch.setattr(sparse, "_INDEX_OF", {})
    first = (analyze(text), encode_document(text))
    assert sparse._TERMS_OF  # the words are remembered now
    assert (analyze(text), encode_document(text)) == first
    monkeypatch.setattr(sparse, "MEMO_SIZE", 2)  # full memos are emptied, not wrong
    monkeypatch.setattr(sparse, "_TERMS_OF", {})
    monkeypatch.setattr(sparse, "_INDEX_OF", {})
    assert (analyze(text), encode_document(text)) == first
    assert 0 < len(sparse._TERMS_OF) <= 2 and 0 < len(sparse._INDEX_OF) <= 2


def test_bm25_weight_saturates_monotonically_in_tf() -> None:
    # Same length (12 terms) with the term repeated 1..12 times; the rest distinct fillers.
    values = []
    for tf in range(1, 13):
        text = " ".join(["apple"] * tf + fillers(12 - tf))
        values.append(weights(encode_document(text))[term_index("appl")])
    assert all(a < b for a, b in zip(values, values[1:], strict=False))
    gains = [b - a for a, b in zip(values, values[1:], strict=False)]
    assert all(a > b for a, b in zip(gains, gains[1:], strict=False))
    assert values[-1] < K1 + 1  # the BM25 ceiling


def test_longer_chunks_weigh_a_term_less() -> None:
    short = weights(encode_document("apple banana"))[term_index("appl")]
    long = weights(encode_document(" ".join(["apple", *fillers(200)])))
    assert long[term_index("appl")] < short


def test_weight_equals_the_formula_at_average_length() -> None:
    text = " ".join(["apple"] * 2 + fillers(int(AVG_LEN) - 2))
    assert len(analyze(text)) == AVG_LEN
    assert weights(encode_document(text))[term_index("appl")] == pytest.approx(
        2 * (K1 + 1) / (2 + K1)
    )


def test_query_weights_are_one_per_unique_term() -> None:
    query = encode_query("apple apple banana")
    assert sorted(query.indices) == query.indices
    assert len(query) == 2 and query.values == [1.0, 1.0]


@pytest.mark.parametrize("text", ["", "   \n\t", "the of and", "!!! ---"])
def test_empty_text_gives_an_empty_vector(text: str) -> None:
    assert encode_document(text) == SparseTerms()
    assert encode_query(text) == SparseTerms()


def test_average_length_follows_the_chunk_size() -> None:
    assert average_length(1000, "chars") == pytest.approx(AVG_LEN)
    assert average_length(2000, "chars") == pytest.approx(2 * AVG_LEN)
    assert average_length(256, "tokens") == pytest.approx(87.04)
    assert average_length(10, "chars") == 8.0
