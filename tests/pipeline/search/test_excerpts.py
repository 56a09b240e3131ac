"""Excerpts and highlights: read with the keyword analyzer, so a highlight is a term search
matched, and the excerpt holds the sentence a query quotes."""

from __future__ import annotations

import pytest

from docingest.pipeline.chunking import ChunkingSpec
from docingest.pipeline.prepare import prepare_document
from docingest.pipeline.search.excerpts import (
    EXCERPT_MAX_CHARS,
    MAX_HIGHLIGHTS,
    answer,
    query_terms,
    sentences,
    within,
)
from docingest.pipeline.settings import Settings
from docingest.pipeline.sparse import analyze, term_spans
from tests.support.paths import CORPUS_DIR

PROBE_FILES = [
    "rfc2616-http11.txt", "rfc6455-websocket.txt", "wikipedia-iwan-roberts-norwich.txt",
    "uspto-patent-aps-5700647.txt", "python311-library-csv.rst.txt", "debian-reference.en.txt",
]  # fmt: skip
PROBES_PER_FILE = 150


def marked(text: str, query: str) -> list[str]:
    return [text[start:end] for start, end in answer(text, query_terms(query)).highlights]


def test_term_spans_are_the_analyzers_terms_with_their_offsets() -> None:
    text = "John's runners ran; ERR_TLS_CERT failed on 東京都 with ﬁnance and QdrantClient."
    spans = term_spans(text)
    assert [term for term, _, _ in spans] == analyze(text)
    assert all(0 <= start < end <= len(text) for _, start, end in spans)
    assert ("東京", text.index("東京"), text.index("東京") + 2) in spans


def test_highlights_find_stems_identifiers_and_cjk_bigrams() -> None:
    text = "The runner was running. Set ERR_TLS_CERT_ALTNAME_INVALID. 東京都に住む. QdrantClient."
    assert marked(text, "runs") == ["runner", "running"] or marked(text, "runs") == ["running"]
    assert marked(text, "altname invalid") == ["ERR_TLS_CERT_ALTNAME_INVALID"]
    assert marked(text, "ERR_TLS_CERT_ALTNAME_INVALID") == ["ERR_TLS_CERT_ALTNAME_INVALID"]
    assert marked(text, "東京都") == ["東京都"]  # two overlapping bigrams, one span
    assert marked(text, "qdrant client") == ["QdrantClient"]
    assert marked(text, "the was") == []  # stop words match nothing, as in search


def test_the_excerpt_is_sentences_of_the_text_with_offsets() -> None:
    text = (
        "Bread needs flour. Knead the dough for ten minutes.\n\nBake it at 230 degrees. "
        "Tomatoes need sun. Roses need pruning."
    )
    found = answer(text, query_terms("how long to knead dough"))
    start, end = found.excerpt
    assert text[start:end] == "Knead the dough for ten minutes."
    assert within(found.highlights, found.excerpt) == [(0, 5), (10, 15)]
    found = answer(text, query_terms("knead dough then bake"))
    assert text[slice(*found.excerpt)] == (
        "Knead the dough for ten minutes.\n\nBake it at 230 degrees."
    )  # consecutive sentences, across a paragraph break
    nothing = answer(text, query_terms("quantum chromodynamics"))
    assert text[slice(*nothing.excerpt)] == "Bread needs flour." and nothing.highlights == []


def test_several_sentences_only_when_they_hold_more_and_fit() -> None:
    text = "Alpha beta. Gamma delta. Epsilon zeta. Eta theta."
    assert text[slice(*answer(text, query_terms("beta gamma")).excerpt)] == (
        "Alpha beta. Gamma delta."
    )
    long = "Alpha beta " + "word " * (EXCERPT_MAX_CHARS // 5) + "end. Gamma delta."
    excerpt = long[slice(*answer(long, query_terms("beta gamma")).excerpt)]
    assert excerpt.startswith("Alpha beta") and "Gamma" not in excerpt  # the two do not fit
    assert len(excerpt) <= EXCERPT_MAX_CHARS  # the long sentence is cut, not kept whole


def test_a_megabyte_on_one_line_gives_a_small_excerpt_and_few_highlights() -> None:
    """A chunk of one 1 MB sentence (issue 40: a 2.1 MB excerpt and 7,813 highlights per hit)."""
    filler = "the engine stalls when the pump sticks and "
    line = filler * 12_000 + "then the fuel valve is replaced " + filler * 12_000
    found = answer(line, query_terms("fuel valve"))
    start, end = found.excerpt
    assert end - start <= EXCERPT_MAX_CHARS and "fuel valve" in line[start:end]
    assert line[start] != " " and line[end - 1] != " "  # cut between words
    many = answer(line, query_terms("engine pump"))
    assert 0 < len(many.highlights) <= MAX_HIGHLIGHTS
    inside = within(many.highlights, many.excerpt)
    assert inside and all(line[slice(*span)] in ("engine", "pump") for span in many.highlights)
    none = answer(line, query_terms("quantum"))
    assert none.excerpt[0] == 0 and none.excerpt[1] <= EXCERPT_MAX_CHARS and not none.highlights
    word = "zq" + "k" * 900  # one term longer than an excerpt, last in the sentence
    start, end = answer(filler * 50 + word, query_terms(word)).excerpt
    assert 0 < end - start <= EXCERPT_MAX_CHARS


def test_sentences_are_the_chunkers_inside_paragraphs() -> None:
    text = "Dr. Smith arrived. He left.\n\nHeading\n\nNext one! Last?"
    assert [text[a:b] for a, b in sentences(text)] == [
        "Dr. Smith arrived.", "He left.", "Heading", "Next one!", "Last?",
    ]  # fmt: skip


def test_the_excerpt_holds_the_quoted_sentence_in_95_percent_of_chunks_holding_it() -> None:
    """Held-out-style probes: a sentence of a real document as the query; every chunk that
    holds it whole must have an excerpt holding it (>= 95%)."""
    held = hits = 0
    for name in PROBE_FILES:
        path = CORPUS_DIR / "txt" / name
        prepared = prepare_document(
            path.read_bytes(), filename=name, settings=Settings(), chunking=ChunkingSpec()
        )
        text = prepared.text
        probes = [(a, b) for a, b in sentences(text) if 40 <= b - a <= 400]
        step = max(len(probes) // PROBES_PER_FILE, 1)
        for start, end in probes[::step]:
            query = text[start:end]
            for chunk in prepared.chunks:
                if chunk.start <= start and end <= chunk.end:
                    held += 1
                    lo, hi = answer(chunk.text, query_terms(query)).excerpt
                    hits += chunk.start + lo <= start and end <= chunk.start + hi
    rate = hits / held
    assert held > 500 and rate >= 0.95, f"the excerpt held {hits} of {held} probes"


@pytest.mark.parametrize("query", ["", "   ", "!!!"])
def test_a_query_without_terms_gets_the_first_sentence(query: str) -> None:
    text = "First one here. Second one."
    found = answer(text, query_terms(query))
    assert text[slice(*found.excerpt)] == "First one here." and found.highlights == []
