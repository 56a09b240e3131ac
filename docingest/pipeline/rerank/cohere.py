"""The Cohere-style `POST {url}/rerank`, as Cohere, Jina, Voyage, vLLM, Infinity and LocalAI
speak it.

Request: `{"model", "query", "documents": [str, ...]}`. Neither `top_n` (Cohere, Jina, vLLM,
Infinity, LocalAI) nor `top_k` (Voyage) is sent: without it every server scores every
document, which is what the stage needs, and no server refuses the other's name for a field it
was not sent. `return_documents` is not sent either (Cohere's v2 API dropped it; all default
to not echoing the texts). `model` is left out when none is configured (a one-model Infinity
or vLLM server needs none).

Replies covered (documented schemas, checked 2026-12):
- Cohere v1 and v2 (`{url}` = `https://api.cohere.com/v2`): `{"results": [{"index",
  "relevance_score"}], "meta"}`, v1 with `"document": {"text"}` when asked;
- Jina (`https://api.jina.ai/v1`), LocalAI (`/v1`, Jina's schema), vLLM (`/v1` or `/v2`, both
  Jina- and Cohere-compatible) and Infinity: `{"results": [{"index", "relevance_score",
  "document": {"text"} | str | null}], "usage"}`;
- Voyage (`https://api.voyageai.com/v1`): `{"object": "list", "data": [{"index",
  "relevance_score", "document"?}], "usage"}`;
- a `score` field in place of `relevance_score` (some OpenAI-style proxies).
Echoed documents are ignored; results may come in any order. A reply that misses a document,
repeats an index, or holds a non-finite score is refused (`rerank_bad_reply`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from docingest.pipeline.rerank.base import bad_reply, checked_scores, index_of, score_of
from docingest.pipeline.rerank.http import HttpReranker


class CohereReranker(HttpReranker):
    provider = "cohere"

    def scores(self, query: str, documents: Sequence[str], *, deadline: float) -> list[float]:
        body: dict[str, Any] = {"query": query, "documents": list(documents)}
        if self.model:
            body["model"] = self.model
        return parse_reply(self.http.post("/rerank", body, deadline=deadline), len(documents))


def parse_reply(reply: object, count: int) -> list[float]:
    """The scores of a Cohere-style reply in input order (see the module for the variants)."""
    items = None
    if isinstance(reply, dict):
        items = reply.get("results", reply.get("data"))
    if not isinstance(items, list):
        raise bad_reply("it has no `results` (or `data`) list")
    by_index: dict[int, float] = {}
    for item in items:
        if not isinstance(item, dict):
            raise bad_reply("a result is not an object")
        index = index_of(item.get("index"), count, by_index)
        by_index[index] = score_of(item.get("relevance_score", item.get("score")))
    return checked_scores(by_index, count)
