"""Hugging Face Text Embeddings Inference's `POST {url}/rerank`.

Request: `{"query", "texts": [str, ...], "raw_scores": false, "truncate": true}`; reply: a
bare list `[{"index", "score", "text"?}]`, best first. `raw_scores: false` asks for TEI's
sigmoid of the logits (0-1), comparable across queries so a `score_threshold` means something;
`truncate: true` cuts a text past the model's length instead of failing the request. A TEI
server serves one model, so the model name is not sent.
"""

from __future__ import annotations

from collections.abc import Sequence

from docingest.pipeline.rerank.base import bad_reply, checked_scores, index_of, score_of
from docingest.pipeline.rerank.http import HttpReranker


class TeiReranker(HttpReranker):
    provider = "tei"

    def scores(self, query: str, documents: Sequence[str], *, deadline: float) -> list[float]:
        body = {"query": query, "texts": list(documents), "raw_scores": False, "truncate": True}
        return parse_reply(self.http.post("/rerank", body, deadline=deadline), len(documents))


def parse_reply(reply: object, count: int) -> list[float]:
    if not isinstance(reply, list):
        raise bad_reply("it is not a list of ranks")
    by_index: dict[int, float] = {}
    for item in reply:
        if not isinstance(item, dict):
            raise bad_reply("a rank is not an object")
        index = index_of(item.get("index"), count, by_index)
        by_index[index] = score_of(item.get("score"))
    return checked_scores(by_index, count)
