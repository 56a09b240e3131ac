"""`docingest search` shows each result's excerpt with the server's highlights."""

from __future__ import annotations

from docingest.commands import excerpt_text
from docingest.models import SearchResult


def test_the_excerpt_is_shown_with_its_highlights_in_bold() -> None:
    text = "Intro line.\nKnead the dough\nfor ten minutes. Then bake it."
    start = text.index("Knead")
    end = text.index(" Then")
    knead, dough = text.index("Knead"), text.index("dough")
    hit = result(
        text=text,
        excerpt={"text": text[start:end], "start": start, "end": end},
        highlights=[[knead, knead + 5], [dough, dough + 5], [text.index("bake"), len(text) - 4]],
    )
    shown = excerpt_text(hit)
    assert shown.plain == "… Knead the dough for ten minutes. …"
    bold = [shown.plain[span.start : span.end] for span in shown.spans]
    assert bold == ["Knead", "dough"]  # "bake" lies outside the excerpt


def test_a_server_without_excerpts_gets_the_start_of_the_text() -> None:
    hit = result(text="word " * 100)
    shown = excerpt_text(hit, snippet=20)
    assert shown.plain == "word word word word …" and not shown.spans


def result(**fields: object) -> SearchResult:
    """A search result as the SDK reads it from a server's response."""
    return SearchResult.model_validate(
        {"document_id": "doc", "chunk_index": 0, "score": 1.0, "headings": []} | fields
    )
