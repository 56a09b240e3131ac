"""A listwise re-ranking by any OpenAI-compatible chat model (`POST {url}/chat/completions`).

The source design's "send the top 20 plus the query to the main language model": one request
holds the query and every candidate, each labelled `[n]` (1-based) and cut to
`PASSAGE_CHARS`, and asks for the labels best first. The reply is asked for as structured
output (`response_format` with a JSON schema `{"ranking": [int, ...]}`, which OpenAI, vLLM,
llama.cpp, Ollama and LocalAI honour); a server that refuses the field (HTTP 400/422) is asked
again once without it, and from then on this re-ranker sends it no more. Either way the
content is parsed leniently: the JSON object, a bare list, or the first JSON object or list in
the text (a model that wraps it in prose or a code fence), labels as numbers or strings
(`3`, `"3"`, `"[3]"`).

The ranking is validated, not trusted: unknown labels are dropped, a repeated one counts at
its first place, and the candidates the model left out follow in first-stage order. A reply
naming no candidate at all is refused (`rerank_bad_reply`). A listwise model gives ranks, not
scores, so the score is `(n - rank) / n` for n candidates: 1.0 for the first, above 0 for the
last; comparable within one search only.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

from docingest.pipeline.errors import RerankFailed
from docingest.pipeline.rerank.base import bad_reply
from docingest.pipeline.rerank.http import HttpReranker, RerankHttp

PASSAGE_CHARS = 2000
"""Characters of each candidate sent (a default chunk is 1,000; the title and headings lead)."""

SYSTEM_PROMPT = (
    "You rank search results. Given a query and numbered passages, order the passage numbers "
    "from most to least useful for answering the query. Answer with JSON only: "
    '{"ranking": [numbers, best first]}, every passage number exactly once.'
)

RANKING_SCHEMA: dict[str, Any] = {
    "type": "json_schema",
    "json_schema": {
        "name": "ranking",
        "strict": True,
        "schema": {
            "type": "object",
            "properties": {"ranking": {"type": "array", "items": {"type": "integer"}}},
            "required": ["ranking"],
            "additionalProperties": False,
        },
    },
}

_JSON_IN_TEXT = re.compile(r"\{.*\}|\[.*\]", re.DOTALL)
_LABEL = re.compile(r"^\s*\[?\s*(\d{1,6})\s*\]?\s*$")


class LlmReranker(HttpReranker):
    provider = "llm"

    def __init__(self, http: RerankHttp, *, model: str) -> None:
        super().__init__(http, model=model)
        self.structured = True
        """Whether `response_format` is sent (cleared when the server refuses it)."""

    def scores(self, query: str, documents: Sequence[str], *, deadline: float) -> list[float]:
        messages = [
            {"role": "system", "content": SYSTEM_PROMPT},
            {"role": "user", "content": user_prompt(query, documents)},
        ]
        body: dict[str, Any] = {"model": self.model, "messages": messages, "temperature": 0}
        if self.structured:
            try:
                reply = self.http.post(
                    "/chat/completions",
                    body | {"response_format": RANKING_SCHEMA},
                    deadline=deadline,
                )
            except RerankFailed as exc:
                if exc.code != "rerank_refused" or not re.search(r"HTTP 4(00|22)", exc.message):
                    raise
                self.structured = False
                reply = self.http.post("/chat/completions", body, deadline=deadline)
        else:
            reply = self.http.post("/chat/completions", body, deadline=deadline)
        order = ranking(parse_labels(content_of(reply)), len(documents))
        count = len(documents)
        scores = [0.0] * count
        for rank, index in enumerate(order):
            scores[index] = (count - rank) / count
        return scores


def user_prompt(query: str, documents: Sequence[str]) -> str:
    passages = "\n\n".join(
        f"[{number}] {text[:PASSAGE_CHARS]}" for number, text in enumerate(documents, 1)
    )
    return f"Query: {query}\n\nPassages:\n\n{passages}\n\nRank all {len(documents)} passages."


def content_of(reply: object) -> str:
    """The first choice's message content of a chat completion."""
    try:
        content = reply["choices"][0]["message"]["content"]  # type: ignore[index]
    except (KeyError, IndexError, TypeError) as exc:
        raise bad_reply("it is not a chat completion with a message") from exc
    if not isinstance(content, str) or not content.strip():
        raise bad_reply("the model's message is empty")
    return content


def parse_labels(content: str) -> list[object]:
    """The ranking in a model's answer, leniently (see the module)."""
    parsed: object = None
    try:
        parsed = json.loads(content)
    except (ValueError, RecursionError):
        found = _JSON_IN_TEXT.search(content)
        if found is not None:
            try:
                parsed = json.loads(found.group())
            except (ValueError, RecursionError):
                parsed = None
    if isinstance(parsed, dict):
        parsed = parsed.get("ranking")
    if not isinstance(parsed, list):
        raise bad_reply("the model's answer holds no ranking list")
    return parsed


def ranking(labels: list[object], count: int) -> list[int]:
    """Input indexes best first: valid labels in the model's order, then the rest in order."""
    order: list[int] = []
    seen: set[int] = set()
    for label in labels:
        number = _number(label)
        if number is None or not 1 <= number <= count or number - 1 in seen:
            continue
        seen.add(number - 1)
        order.append(number - 1)
    if not order:
        raise bad_reply("the model's ranking names none of the passages")
    return order + [index for index in range(count) if index not in seen]


def _number(label: object) -> int | None:
    if isinstance(label, bool):
        return None
    if isinstance(label, int):
        return label
    if isinstance(label, str) and (match := _LABEL.match(label)):
        return int(match.group(1))
    return None
