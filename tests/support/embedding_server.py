"""A fake OpenAI-compatible `POST /v1/embeddings` server over real sockets, for tests and benches.

Vectors are deterministic: `fake_vector(model, text, n)` expands SHAKE-256 of the model and
text into n int16 values, scaled and offset so they are not unit length (the client must
normalise). A request's `dimensions` returns the first n components of the native vector
(Matryoshka style). `encoding_format` "base64" (what the `openai` client sends by default:
little-endian float32) and "float" are both served.

Faults are scripted per request: `add_faults(...)` queues specs consumed one per request in
arrival order; `fail_when(predicate, fault, times=)` applies a fault to every request whose
inputs match. A fault is a `Fault` or a dict of its fields, e.g. `{"status": 429, "headers":
{"Retry-After": "2"}}`, `{"status": 500}`, `{"delay": 5}` (answer late), `{"malformed": True}`
(invalid JSON), `{"wrong_dimensions": True}`, `{"disconnect": True}`.

`fail_from(n, fault)` spoils every request from the n-th on (an endpoint that goes down and
stays down) until `recover()`. `fixed_dimensions` answers vectors of that size whatever the
request's `dimensions` (a deployment of the wrong size), `model_salt` other vectors under the
same model name (another model), and `report_usage=False` leaves out the reply's `usage`.
`words=True` answers `word_vectors` instead: vectors that cluster as real embeddings do.
`vectors=fn` answers `fn(texts, dimensions)` instead: a real model behind the fake's API (a
bench's cached local embedder, so several services embed alike at the cost of one).

`latency` is the least time between receiving a request and answering it (the vectors are
computed inside it), plus a uniform random `latency_jitter`. Every request is recorded, with
its status and the `prompt_tokens` its reply reported (`served`, `served_tokens`: the server's
own request and token log, to compare with the client's usage).

Manual use: `python tests/support/embedding_server.py --port 8099 --latency-ms 100`.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import json
import random
import signal
import sys
import threading
import time
import zlib
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Self

import numpy as np

OPENAI_DIMENSIONS = {
    "text-embedding-3-small": 1536,
    "text-embedding-3-large": 3072,
    "text-embedding-ada-002": 1536,
}
"""Native sizes of OpenAI's models; any other model gets the server's `dimensions`."""


def fake_vector(model: str, text: str, dimensions: int) -> np.ndarray:
    """Return the server's unnormalised float32 vector of `text`; a prefix for fewer dims."""
    vector: np.ndarray = fake_vectors(model, [text], dimensions)[0]
    return vector


def fake_vectors(model: str, texts: list[str], dimensions: int) -> np.ndarray:
    """Return `fake_vector` of each text, as one (len(texts), dimensions) float32 array."""
    digests = b"".join(
        hashlib.shake_256(f"{model}\0{text}".encode("utf-8", "surrogatepass")).digest(
            2 * dimensions
        )
        for text in texts
    )
    raw = np.frombuffer(digests, dtype="<i2").reshape(len(texts), dimensions)
    return (raw.astype(np.float32) / 8192.0 + np.float32(0.5)).astype("<f4")


def word_vectors(texts: list[str], dimensions: int) -> np.ndarray:
    """A feature-hashed bag of words per text (CRC-32 of each lower-cased word picks a
    component and a sign), plus a small constant so an empty text has a direction: texts that
    share words are near, so the vectors cluster as real embeddings do, unlike `fake_vectors`
    (an index's build costs about a quarter as much on them: BENCHMARKS.md)."""
    vectors = np.full((len(texts), dimensions), 0.01, dtype=np.float32)
    for row, text in enumerate(texts):
        for word in text.lower().split():
            hashed = zlib.crc32(word.encode("utf-8", "surrogatepass"))
            vectors[row, hashed % dimensions] += 1.0 if hashed & 0x80000000 else -1.0
    return vectors


@dataclass(frozen=True)
class Fault:
    """How to spoil one response."""

    status: int | None = None
    headers: Mapping[str, str] = field(default_factory=dict)
    message: str | None = None
    delay: float = 0.0
    malformed: bool = False
    wrong_dimensions: bool = False
    disconnect: bool = False


FaultSpec = Fault | Mapping[str, Any]


def as_fault(spec: FaultSpec) -> Fault:
    return spec if isinstance(spec, Fault) else Fault(**spec)


@dataclass
class RecordedRequest:
    """What one request carried and how it was answered (times are `time.monotonic()`)."""

    received: float
    path: str
    headers: dict[str, str]
    inputs: list[str]
    model: str | None
    dimensions: int | None
    encoding_format: str | None
    fault: Fault | None = None
    status: int | None = None
    answered: float | None = None
    prompt_tokens: int | None = None
    """What the reply's `usage.prompt_tokens` said (None: no reply with vectors)."""


@dataclass
class _Rule:
    predicate: Callable[[list[str]], bool]
    fault: Fault
    times: int | None


class FakeEmbeddingServer:
    """The server, run in a background thread; use it as a context manager."""

    def __init__(
        self,
        *,
        dimensions: int = 1536,  # of models other than OpenAI's own
        latency: float = 0.0,
        latency_jitter: float = 0.0,
        always_float: bool = False,
        host: str = "127.0.0.1",
        port: int = 0,
        seed: int = 0,
        fixed_dimensions: int | None = None,
        model_salt: str = "",
        report_usage: bool = True,
        words: bool = False,
        vectors: Callable[[list[str], int], np.ndarray] | None = None,
    ) -> None:
        self.dimensions = dimensions
        self.words = words
        self.vectors = vectors
        self.fixed_dimensions = fixed_dimensions
        self.model_salt = model_salt
        self.report_usage = report_usage
        self._fail_from: tuple[int, Fault] | None = None
        self.latency = latency
        self.latency_jitter = latency_jitter
        self.always_float = always_float
        self._address = (host, port)
        self._random = random.Random(seed)
        self._lock = threading.Lock()
        self._faults: deque[Fault] = deque()
        self._rules: list[_Rule] = []
        self._requests: list[RecordedRequest] = []
        self._stopping = threading.Event()
        self._httpd: _HTTPServer | None = None
        self._thread: threading.Thread | None = None

    # --- lifecycle ---------------------------------------------------------------------
    def start(self) -> Self:
        self._httpd = _HTTPServer(self._address, _Handler)
        self._httpd.owner = self
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopping.set()
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
        if self._thread is not None:
            self._thread.join()

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    @property
    def port(self) -> int:
        assert self._httpd is not None, "start() the server first"
        return int(self._httpd.server_address[1])

    @property
    def base_url(self) -> str:
        """The URL to give an OpenAI client (`.../v1`)."""
        return f"http://{self._address[0]}:{self.port}/v1"

    # --- scripting and records ----------------------------------------------------------
    def add_faults(self, *specs: FaultSpec) -> None:
        """Queue faults; each request consumes the next one."""
        with self._lock:
            self._faults.extend(as_fault(spec) for spec in specs)

    def fail_when(
        self, predicate: Callable[[list[str]], bool], fault: FaultSpec, *, times: int | None = None
    ) -> None:
        """Spoil requests whose inputs satisfy `predicate` (at most `times` of them)."""
        with self._lock:
            self._rules.append(_Rule(predicate, as_fault(fault), times))

    def fail_inputs_containing(
        self, marker: str, fault: FaultSpec, *, times: int | None = None
    ) -> None:
        self.fail_when(lambda inputs: any(marker in text for text in inputs), fault, times=times)

    def fail_from(self, number: int, fault: FaultSpec) -> None:
        """Spoil the `number`-th request received (counting from 1) and every later one."""
        with self._lock:
            self._fail_from = (number, as_fault(fault))

    def recover(self) -> None:
        """Stop `fail_from`'s faults: answer normally again."""
        with self._lock:
            self._fail_from = None

    @property
    def served(self) -> list[RecordedRequest]:
        """The requests answered with vectors."""
        with self._lock:
            return [request for request in self._requests if request.prompt_tokens is not None]

    @property
    def served_tokens(self) -> int:
        """The tokens this server reported for the requests it served."""
        return sum(request.prompt_tokens or 0 for request in self.served)

    @property
    def requests(self) -> list[RecordedRequest]:
        with self._lock:
            return list(self._requests)

    def clear(self) -> None:
        with self._lock:
            self._requests.clear()
            self._faults.clear()
            self._rules.clear()

    def _record(self, request: RecordedRequest) -> None:
        with self._lock:
            request.fault = self._faults.popleft() if self._faults else None
            failing = self._fail_from
            if request.fault is None and failing and len(self._requests) + 1 >= failing[0]:
                request.fault = failing[1]
            if request.fault is None:
                for rule in self._rules:
                    if rule.times != 0 and rule.predicate(request.inputs):
                        request.fault = rule.fault
                        if rule.times is not None:
                            rule.times -= 1
                        break
            self._requests.append(request)

    def _answer_delay(self, received: float) -> float:
        with self._lock:
            jitter = self._random.uniform(0, self.latency_jitter) if self.latency_jitter else 0.0
        return received + self.latency + jitter - time.monotonic()

    def embedding_reply(self, request: RecordedRequest, *, dimensions: int) -> bytes:
        """Build the OpenAI-shaped success body (assembled by hand: json.dumps is the slow part)."""
        model = request.model or ""
        if self.vectors is not None:
            vectors = np.asarray(self.vectors(request.inputs, dimensions), dtype="<f4")
        elif self.words:
            vectors = word_vectors(request.inputs, dimensions)
        else:
            vectors = fake_vectors(model + self.model_salt, request.inputs, dimensions)
        if self.always_float or request.encoding_format == "float":
            encoded = [json.dumps(vector.tolist()).encode() for vector in vectors]
        else:
            encoded = [b'"' + base64.b64encode(vector.tobytes()) + b'"' for vector in vectors]
        parts = [b'{"object":"list","data":[']
        for index, embedding in enumerate(encoded):
            if index:
                parts.append(b",")
            parts += [b'{"object":"embedding","index":%d,"embedding":' % index, embedding, b"}"]
        tokens = sum(len(text.encode()) // 4 + 1 for text in request.inputs)  # an estimate
        request.prompt_tokens = tokens
        if not self.report_usage:
            parts.append(f'],"model":{json.dumps(model)}}}'.encode())
            return b"".join(parts)
        usage = {"prompt_tokens": tokens, "total_tokens": tokens}
        parts.append(f'],"model":{json.dumps(model)},"usage":{json.dumps(usage)}}}'.encode())
        return b"".join(parts)


class _HTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 1024
    allow_reuse_address = True
    owner: FakeEmbeddingServer

    def handle_error(self, request: Any, client_address: Any) -> None:
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _HTTPServer

    def log_message(self, format: str, *args: Any) -> None:
        return None

    def do_POST(self) -> None:  # http.server's naming
        owner = self.server.owner
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        received = time.monotonic()
        try:
            payload = json.loads(body)
        except ValueError:
            payload = None
        if self.path.rstrip("/") not in ("/v1/embeddings", "/embeddings") or not isinstance(
            payload, dict
        ):
            self._send(404 if isinstance(payload, dict) else 400, _error("bad request"), {})
            return
        inputs = payload.get("input")
        inputs = [inputs] if isinstance(inputs, str) else inputs
        request = RecordedRequest(
            received=received,
            path=self.path,
            headers={name.lower(): value for name, value in self.headers.items()},
            inputs=list(inputs) if isinstance(inputs, list) else [],
            model=payload.get("model"),
            dimensions=payload.get("dimensions"),
            encoding_format=payload.get("encoding_format"),
        )
        owner._record(request)
        fault = request.fault or Fault()
        if fault.delay and owner._stopping.wait(fault.delay):
            self.close_connection = True  # stopping: the client sees its connection end
            return
        if fault.disconnect:
            self.close_connection = True
            request.answered = time.monotonic()
            return
        status = 200
        if fault.status is not None:
            status = fault.status
            encoded = _error(fault.message or f"fault {fault.status}")
        elif not request.inputs or not all(isinstance(t, str) and t for t in request.inputs):
            status, encoded = 400, _error("input must be a non-empty string or list of strings")
        elif fault.malformed:
            encoded = b'{"object": "list", "data": [{"object": "embedding", "index": 0, "embed'
        else:
            native = OPENAI_DIMENSIONS.get(request.model or "", owner.dimensions)
            dimensions = owner.fixed_dimensions or request.dimensions or native
            if fault.wrong_dimensions:
                dimensions += 1
            encoded = owner.embedding_reply(request, dimensions=dimensions)
        if (wait := owner._answer_delay(received)) > 0 and owner._stopping.wait(wait):
            self.close_connection = True
            return
        request.status = status
        request.answered = time.monotonic()
        self._send(status, encoded, fault.headers)

    def _send(self, status: int, body: bytes, headers: Mapping[str, str]) -> None:
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        for name, value in headers.items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(body)


def _error(message: str) -> bytes:
    error = {"message": message, "type": "invalid_request_error", "param": None, "code": None}
    return json.dumps({"error": error}).encode()


def main(argv: Iterable[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8099, help="0 picks a free port")
    parser.add_argument("--latency-ms", type=float, default=0.0)
    parser.add_argument("--jitter-ms", type=float, default=0.0)
    parser.add_argument("--dimensions", type=int, default=1536)
    args = parser.parse_args(list(argv) if argv is not None else None)
    server = FakeEmbeddingServer(
        dimensions=args.dimensions,
        latency=args.latency_ms / 1000,
        latency_jitter=args.jitter_ms / 1000,
        host=args.host,
        port=args.port,
    ).start()
    done = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: done.set())
    sys.stdout.write(f"listening on {server.base_url}\n")
    sys.stdout.flush()
    try:
        done.wait()
    except KeyboardInterrupt:
        pass
    finally:
        server.stop()


if __name__ == "__main__":
    main()
