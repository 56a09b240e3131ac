"""A fake re-ranker over real sockets, speaking every schema docingest's providers send.

- `POST /rerank` with `documents`: the Cohere-style reply, shaped by `style`: `cohere`
  (`results` of `index` + `relevance_score`, best first), `jina` (each with `"document":
  {"text"}` echoed), `voyage` (`{"object": "list", "data": [...]}`), `score` (the score under
  `score`);
- `POST /rerank` with `texts`: Hugging Face TEI's bare list of `{"index", "score"}`;
- `POST /chat/completions`: an OpenAI chat completion whose message is `{"ranking": [...]}`
  (1-based passage labels, read back from the prompt's `[n]` lines), best first; `llm_style`
  `prose` wraps it in words and a code fence, `bad_ids` adds unknown, repeated and string
  labels and leaves the last passage out, `no_schema` answers 400 to a request with
  `response_format`.

Scores are a known function, `fake_score(query, text)`: a uniform value in [0, 1) from
SHA-256, so a test can compute the order the re-ranker must produce. Faults are queued per
request (`add_faults`) or set for all (`always`): `{"status": 500}`, `{"status": 429,
"headers": {"Retry-After": "0"}}`, `{"delay": 5}` (answer late), or a garbage reply:
`{"garbage": "nan" | "huge" | "not_json" | "missing" | "repeated" | "bool" | "nested" |
"out_of_range"}`, or any JSON `{"reply": ...}`. Every request is recorded (path, JSON body,
headers).
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
from collections import deque
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Self

_LABEL_LINE = re.compile(r"^\[(\d+)\] ", re.MULTILINE)


def fake_score(query: str, text: str) -> float:
    """The fake re-ranker's score of `text` for `query`: uniform in [0, 1)."""
    digest = hashlib.sha256(f"{query}\0{text}".encode("utf-8", "surrogatepass")).digest()
    return int.from_bytes(digest[:8], "big") / 2**64


def fake_order(query: str, texts: list[str]) -> list[int]:
    """Indexes of `texts` best first, as the fake scores them (ties: input order)."""
    return sorted(range(len(texts)), key=lambda i: -fake_score(query, texts[i]))


@dataclass(frozen=True)
class Recorded:
    path: str
    body: Any
    headers: dict[str, str]


class FakeRerankServer:
    def __init__(self, *, style: str = "cohere", llm_style: str = "json") -> None:
        self.style = style
        self.llm_style = llm_style
        self.always: dict[str, Any] | None = None
        self._faults: deque[dict[str, Any]] = deque()
        self._requests: list[Recorded] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._server = _HTTPServer(("127.0.0.1", 0), _Handler)
        self._server.fake = self
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def start(self) -> Self:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._server.shutdown()
        self._server.server_close()

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def add_faults(self, *faults: dict[str, Any]) -> None:
        with self._lock:
            self._faults.extend(faults)

    @property
    def requests(self) -> list[Recorded]:
        with self._lock:
            return list(self._requests)

    def _take(self, recorded: Recorded) -> dict[str, Any] | None:
        with self._lock:
            self._requests.append(recorded)
            return self._faults.popleft() if self._faults else self.always

    def reply(self, path: str, body: Any) -> tuple[int, bytes]:
        if path.endswith("/chat/completions"):
            return self._chat(body)
        if not path.endswith("/rerank"):
            return 404, b'{"error": "no such route"}'
        query = body["query"]
        if "texts" in body:  # TEI
            texts = body["texts"]
            ranks = [{"index": i, "score": fake_score(query, texts[i])} for i in range(len(texts))]
            ranks.sort(key=lambda item: -item["score"])
            return 200, json.dumps(ranks).encode()
        documents = body["documents"]
        items: list[dict[str, Any]] = []
        for i in fake_order(query, documents):
            item: dict[str, Any] = {"index": i}
            item["score" if self.style == "score" else "relevance_score"] = fake_score(
                query, documents[i]
            )
            if self.style == "jina":
                item["document"] = {"text": documents[i]}
            items.append(item)
        if self.style == "voyage":
            reply: dict[str, Any] = {"object": "list", "data": items, "usage": {"total_tokens": 1}}
        else:
            reply = {"id": "fake", "results": items, "meta": {"billed_units": {"search_units": 1}}}
        return 200, json.dumps(reply).encode()

    def _chat(self, body: Any) -> tuple[int, bytes]:
        if self.llm_style == "no_schema" and "response_format" in body:
            return 400, b'{"error": {"message": "response_format is not supported"}}'
        prompt = body["messages"][-1]["content"]
        query = prompt.split("\n", 1)[0].removeprefix("Query: ")
        passages = re.split(r"\n\n(?=\[\d+\] )", prompt.split("Passages:\n\n", 1)[1])
        texts = [_LABEL_LINE.sub("", p, count=1) for p in passages]
        texts[-1] = texts[-1].rsplit("\n\nRank all ", 1)[0]
        labels: list[Any] = [i + 1 for i in fake_order(query, texts)]
        if self.llm_style == "bad_ids":
            left_out = labels.pop()  # the worst: the client must append it last
            assert left_out
            labels = [99, labels[0], labels[0], *[f"[{n}]" for n in labels[1:]], 0, True]
        content = json.dumps({"ranking": labels})
        if self.llm_style == "prose":
            content = f"Here is the ranking:\n```json\n{content}\n```\nHope this helps."
        reply = {
            "id": "chatcmpl-fake",
            "object": "chat.completion",
            "model": body.get("model"),
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": content},
                    "finish_reason": "stop",
                }
            ],
        }
        return 200, json.dumps(reply).encode()


def garbage(kind: str) -> bytes:
    """A reply body no re-ranker should accept."""
    if kind == "nan":
        return b'{"results": [{"index": 0, "relevance_score": NaN}]}'
    if kind == "huge":
        return b'{"results": [], "pad": "' + b"x" * (17 * 1024**2) + b'"}'
    if kind == "not_json":
        return b"<html>502 Bad Gateway</html>"
    if kind == "missing":
        return b'{"results": [{"index": 0, "relevance_score": 0.5}]}'
    if kind == "repeated":
        return (
            b'{"results": [{"index": 0, "relevance_score": 0.5},'
            b' {"index": 0, "relevance_score": 0.4}]}'
        )
    if kind == "bool":
        return b'{"results": [{"index": 0, "relevance_score": true}]}'
    if kind == "nested":
        return b"[" * 100_000 + b"]" * 100_000
    if kind == "out_of_range":
        return b'{"results": [{"index": 123456789012345678901234567890, "relevance_score": 1}]}'
    raise ValueError(kind)


class _HTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    fake: FakeRerankServer

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # a client that gave up (the deadline) is not the server's error


class _Handler(BaseHTTPRequestHandler):
    server: _HTTPServer
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_POST(self) -> None:  # http.server's naming
        fake = self.server.fake
        raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        body = json.loads(raw)
        fault = fake._take(Recorded(self.path, body, dict(self.headers.items())))
        fault = fault or {}
        if fault.get("delay"):
            fake._stop.wait(fault["delay"])
        if fault.get("status"):
            error = json.dumps({"message": f"fake error {fault['status']}"}).encode()
            self._send(fault["status"], error, fault.get("headers", {}))
            return
        if fault.get("garbage"):
            self._send(200, garbage(fault["garbage"]), {})
            return
        if "reply" in fault:
            self._send(200, json.dumps(fault["reply"]).encode(), {})
            return
        status, reply = fake.reply(self.path, body)
        self._send(status, reply, {})

    def _send(self, status: int, body: bytes, headers: dict[str, str]) -> None:
        try:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            for name, value in headers.items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(body)
        except (BrokenPipeError, ConnectionResetError):
            pass
