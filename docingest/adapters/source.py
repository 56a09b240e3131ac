"""What every adapter returns for a search hit: its text, its source and its scores."""

from __future__ import annotations

from typing import Any

from docingest.models import SearchResult


def hit_fields(hit: SearchResult, *, index: str) -> dict[str, Any]:
    """The hit's source and scores as plain JSON values (framework metadata, MCP results)."""
    fields: dict[str, Any] = {
        "index": index,
        "document_id": hit.document_id,
        "chunk_index": hit.chunk_index,
        "filename": hit.filename,
        "format": hit.format,
        "page_start": hit.page_start,
        "page_end": hit.page_end,
        "headings": list(hit.headings),
        "score": hit.score,
        "scores": hit.scores.model_dump(mode="json"),
        "metadata": dict(hit.metadata),
    }
    if hit.excerpt is not None:
        fields["excerpt"] = hit.excerpt.model_dump(mode="json")
    if hit.start is not None:
        fields["start"], fields["end"] = hit.start, hit.end
    if hit.highlights:
        fields["highlights"] = [list(span) for span in hit.highlights]
    if hit.context is not None:
        fields["context"] = hit.context.model_dump(mode="json")
    return fields


def hit_id(hit: SearchResult, *, index: str) -> str:
    """A stable id of the chunk: index, document and chunk number."""
    return f"{index}/{hit.document_id}#{hit.chunk_index}"
