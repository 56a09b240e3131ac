"""`Client`: the synchronous SDK over httpx. Its endpoint methods are `_operations`' builders
bound to `_send`, so this module holds only the sending, sleeping and looping."""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from types import TracebackType
from typing import TYPE_CHECKING, Any, Concatenate, ParamSpec, TypeVar

import httpx

from docingest import _admin_operations as admin_ops
from docingest import _operations as ops
from docingest._core import (
    DEFAULT_RETRY,
    DEFAULT_TIMEOUT,
    Call,
    Pager,
    ProgressCallback,
    RetryPolicy,
    Source,
    Waiter,
    _answering,
    client_headers,
    default_base_url,
    job_id_of,
    transport_error,
)
from docingest.errors import JobFailed
from docingest.models import Chunk, Document, Job, UploadAccepted

if TYPE_CHECKING:
    from docingest._async_client import AsyncClient

P = ParamSpec("P")
T = TypeVar("T")


def _bind(build: Callable[P, Call[T]]) -> Callable[Concatenate[Client, P], T]:
    @functools.wraps(build)
    def method(self: Client, /, *args: P.args, **kwargs: P.kwargs) -> T:
        return self._send(build(*args, **kwargs))

    return _answering(method, build)


class Client:
    """A docingest service, synchronously; thread-safe (one pooled httpx client).

    `base_url` defaults to DOCINGEST_URL (else http://DOCINGEST_HOST:DOCINGEST_PORT, i.e.
    http://127.0.0.1:8000 when unset) and `api_key` to
    DOCINGEST_API_KEY, as for the command line; `principals` are those a service key acts
    for (sent as `X-Docingest-Principals` on every request). Errors raise `docingest.DocingestError`
    subclasses; 429 and 503 answers are retried as `retry` says (honouring Retry-After)."""

    def __init__(
        self,
        base_url: str | None = None,
        *,
        api_key: str | None = None,
        principals: Sequence[str] | None = None,
        timeout: httpx.Timeout | float = DEFAULT_TIMEOUT,
        retry: RetryPolicy = DEFAULT_RETRY,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self.base_url = (base_url or default_base_url()).rstrip("/")
        self.retry = retry
        self._api_key = api_key
        self._principals = None if principals is None else list(principals)
        self._timeout = timeout
        self._http = httpx.Client(
            base_url=self.base_url,
            headers=client_headers(api_key, principals),
            timeout=timeout,
            transport=transport,
        )

    def close(self) -> None:
        self._http.close()

    def to_async(self) -> AsyncClient:
        """An `AsyncClient` of the same service, key, timeout and retry policy."""
        from docingest._async_client import AsyncClient

        return AsyncClient(
            self.base_url,
            api_key=self._api_key,
            principals=self._principals,
            timeout=self._timeout,
            retry=self.retry,
        )

    def __enter__(self) -> Client:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def _send(self, call: Call[T]) -> T:
        retries = 0
        while True:
            try:
                with call.request_options() as options:
                    response = self._http.request(call.method, call.path, **options)
            except httpx.TransportError as exc:
                raise transport_error(exc, self.base_url) from exc
            delay = self.retry.delay(call, response, retries)
            if delay is None:
                return call.finish(response)
            retries += 1
            time.sleep(delay)

    health = _bind(ops.health)
    ready = _bind(ops.ready)
    metrics = _bind(ops.metrics)
    create_index = _bind(ops.create_index)
    list_indexes = _bind(ops.list_indexes)
    get_index = _bind(ops.get_index)
    delete_index = _bind(ops.delete_index)
    upload = _bind(ops.upload)
    get_job = _bind(ops.get_job)
    list_jobs = _bind(ops.list_jobs)
    cancel_job = _bind(ops.cancel_job)
    retry_job = _bind(ops.retry_job)
    list_documents = _bind(ops.list_documents)
    get_document = _bind(ops.get_document)
    update_metadata = _bind(ops.update_metadata)
    update_access = _bind(ops.update_access)
    delete_document = _bind(ops.delete_document)
    delete_documents = _bind(ops.delete_documents)
    list_chunks = _bind(ops.list_chunks)
    search = _bind(ops.search)
    put_webhook = _bind(admin_ops.put_webhook)
    list_webhooks = _bind(admin_ops.list_webhooks)
    get_webhook = _bind(admin_ops.get_webhook)
    delete_webhook = _bind(admin_ops.delete_webhook)
    list_deliveries = _bind(admin_ops.list_deliveries)
    put_source = _bind(admin_ops.put_source)
    list_sources = _bind(admin_ops.list_sources)
    get_source = _bind(admin_ops.get_source)
    delete_source = _bind(admin_ops.delete_source)
    sync_source = _bind(admin_ops.sync_source)
    list_source_runs = _bind(admin_ops.list_source_runs)
    cancel_source_run = _bind(admin_ops.cancel_source_run)
    create_key = _bind(admin_ops.create_key)
    list_keys = _bind(admin_ops.list_keys)
    revoke_key = _bind(admin_ops.revoke_key)

    def wait(
        self,
        job: str | Job | UploadAccepted,
        *,
        timeout: float = 600.0,
        poll_interval: float = 0.5,
        on_progress: ProgressCallback | None = None,
        raise_on_failure: bool = True,
    ) -> Job:
        """Poll `job` until it is completed, failed or cancelled, calling `on_progress(job)`
        whenever its status, stage or counters move. Raises `JobFailed` for a failed or
        cancelled job (unless `raise_on_failure` is false) and `WaitTimeout` past `timeout`."""
        waiter = Waiter(timeout, poll_interval, on_progress)
        job_id = job_id_of(job)
        while True:
            state = self._send(ops.get_job(job_id))
            if waiter.observe(state):
                if raise_on_failure and state.status != "completed":
                    raise JobFailed(state)
                return state
            time.sleep(waiter.pause())

    def ingest(
        self,
        index: str,
        file: Source,
        *,
        timeout: float = 600.0,
        on_progress: ProgressCallback | None = None,
        **upload: Any,
    ) -> Job:
        """Upload `file` (a path, bytes or a stream) and wait for its job: `upload` + `wait`."""
        accepted = self.upload(index, file, **upload)
        return self.wait(accepted, timeout=timeout, on_progress=on_progress)

    def _walk(self, pager: Pager[T]) -> Iterator[T]:
        while (call := pager.next_call()) is not None:
            yield from pager.take(self._send(call))

    def iter_documents(
        self, index: str, *, filter: Mapping[str, Any] | None = None, page_size: int = 100
    ) -> Iterator[Document]:
        """Every document of `index` (matching `filter`), page by page; a server without
        paging answers them all in one page."""
        pages = ops.documents_page(index, filter, page_size)
        return self._walk(Pager(pages, lambda page: page.documents))

    def iter_chunks(self, index: str, document_id: str, *, page_size: int = 100) -> Iterator[Chunk]:
        """The live version's chunks in order, page by page."""
        return self._walk(Pager(ops.chunks_page(index, document_id, page_size), lambda p: p.chunks))

    def iter_jobs(
        self, *, index: str | None = None, status: str | None = None, page_size: int = 100
    ) -> Iterator[Job]:
        """Recent jobs, newest first, following `next_cursor` where the server gives one."""
        return self._walk(Pager(ops.jobs_page(index, status, page_size), lambda page: page.jobs))
