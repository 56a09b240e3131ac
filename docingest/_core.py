"""What `Client` and `AsyncClient` share: configuration, one `Call` per request (built by
`docingest._operations`), reading answers and errors, the retry policy, paging and waiting.

Nothing here does I/O on the network: each client only sends a `Call` and sleeps in its own
way, so the two cannot drift apart."""

from __future__ import annotations

import email.utils
import inspect
import json
import os
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, Generic, TypeVar
from urllib.parse import quote

import httpx
from pydantic import BaseModel

from docingest.errors import ConnectionProblem, DocingestError, WaitTimeout, error_for
from docingest.models import Job

T = TypeVar("T")
ItemT = TypeVar("ItemT")
F = TypeVar("F", bound=Callable[..., Any])

URL_ENV = "DOCINGEST_URL"
HOST_ENV = "DOCINGEST_HOST"
PORT_ENV = "DOCINGEST_PORT"
API_KEY_ENV = "DOCINGEST_API_KEY"
PRINCIPALS_ENV = "DOCINGEST_PRINCIPALS"
"""The principals a service key acts for, when the client is given none: `user:ana,group:x`
or a JSON list (sent as `X-Docingest-Principals`, which takes both forms)."""
DEFAULT_BASE_URL = "http://127.0.0.1:8000"
"""Where a client looks when neither an argument nor the environment says (`docingest serve`'s
default address)."""
DEFAULT_TIMEOUT = httpx.Timeout(120.0, connect=5.0)
"""Uploads stream the file; a slow write or a long search must not be cut at httpx's 5 s."""
USER_AGENT = "docingest-python"


def default_base_url(*, host: str | None = None, port: int | None = None) -> str:
    """`DOCINGEST_URL`, else the address a `docingest serve` on `host`:`port` answers at.

    `host` and `port` default to `DOCINGEST_HOST` and `DOCINGEST_PORT`, read here from the
    environment (not through the service's settings, which the SDK does not import), so the SDK
    looks where the command line and `make run` do."""
    url = os.environ.get(URL_ENV, "").strip()
    if url:
        return url.rstrip("/")
    if host is None:
        host = os.environ.get(HOST_ENV, "").strip() or "127.0.0.1"
    if port is None:
        port = _env_port()
    if host in ("0.0.0.0", "::", ""):  # listening everywhere: talk to this machine
        host = "127.0.0.1"
    if ":" in host:
        host = f"[{host}]"
    return f"http://{host}:{port}"


def _env_port() -> int:
    """`DOCINGEST_PORT` as a port number (8000 when unset); a ValueError naming it if not one."""
    text = os.environ.get(PORT_ENV, "").strip()
    if not text:
        return 8000
    if not text.isdigit() or not 0 < int(text) < 65536:
        raise ValueError(f"{PORT_ENV}={text!r} is not a port number (1-65535)")
    return int(text)


def client_headers(api_key: str | None, principals: Sequence[str] | None = None) -> dict[str, str]:
    """`api_key`, else DOCINGEST_API_KEY, as a Bearer token (none without either); and the
    `principals` a service key acts for, else DOCINGEST_PRINCIPALS, as
    `X-Docingest-Principals` (a JSON list, so ids holding commas pass whole)."""
    key = api_key if api_key is not None else (os.environ.get(API_KEY_ENV) or None)
    headers = {"User-Agent": USER_AGENT}
    if key:
        headers["Authorization"] = f"Bearer {key}"
    if principals is not None:
        headers["X-Docingest-Principals"] = json.dumps(list(principals))
    elif held := os.environ.get(PRINCIPALS_ENV, "").strip():
        headers["X-Docingest-Principals"] = held
    return headers


def seg(value: str) -> str:
    """Quote a user-given name as one path segment."""
    return quote(value, safe="")


Source = str | os.PathLike[str] | bytes | IO[bytes]
"""What an upload reads: a path, the bytes themselves, or a binary stream (read in chunks as
it is sent, never whole into memory; a seekable stream is sent from its start, as httpx does,
and can then be sent again for a retry)."""


@dataclass
class Upload:
    """A file to send as the multipart `file` part, re-readable for a retry when it can be."""

    source: Source
    filename: str
    content_type: str = "application/octet-stream"
    _start: int | None = None

    @classmethod
    def of(cls, source: Source, filename: str | None) -> Upload:
        if isinstance(source, bytes):
            return cls(source, filename or "upload.bin")
        if isinstance(source, str | os.PathLike):
            path = Path(source)
            return cls(path, filename or path.name)
        name = filename or Path(str(getattr(source, "name", "") or "upload.bin")).name
        return cls(source, name, _start=0 if _seekable(source) else None)

    @property
    def replayable(self) -> bool:
        return not hasattr(self.source, "read") or self._start is not None

    @contextmanager
    def opened(self) -> Iterator[dict[str, Any]]:
        """The `files=` argument of one attempt (a path is opened for the attempt only)."""
        source = self.source
        if isinstance(source, Path):
            with source.open("rb") as handle:
                yield {"file": (self.filename, handle, self.content_type)}
            return
        if hasattr(source, "read") and self._start is not None:
            source.seek(self._start)  # type: ignore[union-attr]
        yield {"file": (self.filename, source, self.content_type)}


def _seekable(stream: IO[bytes]) -> bool:
    try:
        return bool(stream.seekable())
    except (AttributeError, OSError, ValueError):
        return False


@dataclass
class Call(Generic[T]):
    """One request and how to read its answer."""

    method: str
    path: str
    parse: Callable[[httpx.Response], T]
    params: dict[str, Any] | None = None
    json: Any = None
    data: dict[str, str] | None = None
    upload: Upload | None = None
    ok_statuses: frozenset[int] = frozenset()
    """Non-2xx statuses that are an answer, not an error (`/readyz`'s 503)."""

    @property
    def replayable(self) -> bool:
        return self.upload is None or self.upload.replayable

    @contextmanager
    def request_options(self) -> Iterator[dict[str, Any]]:
        options: dict[str, Any] = {}
        if self.params:
            options["params"] = {k: v for k, v in self.params.items() if v is not None}
        if self.json is not None:
            options["json"] = self.json
        if self.data is not None:
            options["data"] = self.data
        if self.upload is None:
            yield options
            return
        with self.upload.opened() as files:
            yield options | {"files": files}

    def finish(self, response: httpx.Response) -> T:
        """The parsed answer, or the contract's error raised as its exception."""
        if response.is_success or response.status_code in self.ok_statuses:
            return self.parse(response)
        raise error_from(response)


def model(cls: type[BaseModel]) -> Callable[[httpx.Response], Any]:
    return lambda response: cls.model_validate(response.json())


def field_of(cls: type[BaseModel], name: str) -> Callable[[httpx.Response], Any]:
    return lambda response: getattr(cls.model_validate(response.json()), name)


def nothing(response: httpx.Response) -> None:
    return None


def text(response: httpx.Response) -> str:
    return response.text


def retry_after(response: httpx.Response) -> float | None:
    """`Retry-After` in seconds (delta-seconds or an HTTP date), None if absent or unreadable."""
    raw = response.headers.get("retry-after")
    if raw is None:
        return None
    try:
        return max(0.0, float(raw))
    except ValueError:
        pass
    try:
        moment = email.utils.parsedate_to_datetime(raw)
    except (TypeError, ValueError):
        return None
    return max(0.0, moment.timestamp() - time.time())


def error_from(response: httpx.Response) -> DocingestError:
    """Read the contract's `{"error": {"code", "message"}}`, or describe what came instead."""
    try:
        error = response.json()["error"]
        code, message = str(error["code"]), str(error["message"])
    except (ValueError, KeyError, TypeError):
        code = f"http_{response.status_code}"
        message = f"{response.request.method} {response.request.url.path} answered " + (
            f"{response.status_code} {response.reason_phrase}"
        )
    return error_for(response.status_code, code, message, retry_after=retry_after(response))


def transport_error(exc: httpx.TransportError, base_url: str) -> DocingestError:
    """The exception for a request that got no answer."""
    if isinstance(exc, httpx.ConnectError):
        return ConnectionProblem(
            "service_unreachable",
            f"no docingest service answers at {base_url}; start one with `docingest serve` "
            "(or set --url / DOCINGEST_URL)",
        )
    if isinstance(exc, httpx.TimeoutException):
        return ConnectionProblem(
            "service_timeout", f"the docingest service at {base_url} did not answer in time"
        )
    return ConnectionProblem("transport_error", f"talking to {base_url} failed: {exc}")


@dataclass(frozen=True)
class RetryPolicy:
    """Retry an answer of `statuses` (429 and 503 by default) up to `max_retries` times,
    waiting what `Retry-After` says, or an exponential backoff where it says nothing; a wait
    longer than `max_wait` is not taken (the error is raised with its `retry_after`).

    The client's policy for its requests to the service; the service's own retries of its
    providers are `docingest.pipeline.embedders.backoff.ProviderRetryPolicy`."""

    max_retries: int = 3
    statuses: frozenset[int] = frozenset({429, 503})
    backoff: float = 0.5
    max_wait: float = 30.0

    def delay(self, call: Call[Any], response: httpx.Response, retries: int) -> float | None:
        """Seconds to wait before sending `call` again, or None to take this answer."""
        if response.status_code not in self.statuses or response.status_code in call.ok_statuses:
            return None
        if retries >= self.max_retries or not call.replayable:
            return None
        wait = retry_after(response)
        if wait is None:
            wait = self.backoff * 2**retries
        return wait if wait <= self.max_wait else None


DEFAULT_RETRY = RetryPolicy()


@dataclass
class Pager(Generic[ItemT]):
    """Walks a paged listing: `fetch(cursor)` builds the call for one page, `items` reads the
    page. A server that answers everything in one page (no `next_cursor`) ends the walk, as
    does a cursor that repeats (a server that ignores `cursor`)."""

    fetch: Callable[[str | None], Call[Any]]
    items: Callable[[Any], list[ItemT]]
    cursor: str | None = None
    seen: set[str] = field(default_factory=set)
    done: bool = False

    def next_call(self) -> Call[Any] | None:
        return None if self.done else self.fetch(self.cursor)

    def take(self, page: Any) -> list[ItemT]:
        """The page's items; remembers where the next page starts."""
        cursor = getattr(page, "next_cursor", None)
        if not cursor or cursor in self.seen:
            self.done = True
        else:
            self.seen.add(cursor)
            self.cursor = cursor
        return self.items(page)


ProgressCallback = Callable[[Job], None]


@dataclass
class Waiter:
    """Follows one job to its end: calls `on_progress` whenever its status, stage, progress
    or counters move, and raises `WaitTimeout` past `timeout` seconds."""

    timeout: float
    poll_interval: float
    on_progress: ProgressCallback | None = None
    deadline: float = 0.0
    last: tuple[object, ...] | None = None

    def __post_init__(self) -> None:
        self.deadline = time.monotonic() + self.timeout

    def observe(self, job: Job) -> bool:
        """Whether `job` is finished; else the seconds to sleep are `self.pause()`."""
        state = (
            job.status, job.stage, job.progress, job.pages_done, job.pages_total,
            job.chunks_embedded, job.chunks_done, job.chunks_total,
        )  # fmt: skip
        if state != self.last:
            self.last = state
            if self.on_progress is not None:
                self.on_progress(job)
        if job.finished:
            return True
        if time.monotonic() >= self.deadline:
            raise WaitTimeout(job, self.timeout)
        return False

    def pause(self) -> float:
        return max(0.0, min(self.poll_interval, self.deadline - time.monotonic()))


def _answering(method: F, build: Callable[..., Any]) -> F:
    """`method`'s signature for `help()` and IDEs: `build`'s, returning what the call parses
    to (not the `Call` itself)."""
    signature = inspect.signature(build)
    answer = signature.return_annotation
    if isinstance(answer, str) and answer.startswith("Call[") and answer.endswith("]"):
        answer = answer[len("Call[") : -1]
    self = inspect.Parameter("self", inspect.Parameter.POSITIONAL_ONLY)
    method.__signature__ = signature.replace(  # type: ignore[attr-defined]
        parameters=[self, *signature.parameters.values()], return_annotation=answer
    )
    return method


def job_id_of(job: str | Any) -> str:
    """A job id from an id, a `Job` or an `UploadAccepted`."""
    return job if isinstance(job, str) else str(job.job_id)
