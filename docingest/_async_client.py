"""`AsyncClient`: the same SDK for asyncio. It sends the very `Call`s `Client` sends (built by
`_operations`), with the same retry policy, pager and waiter; only the awaiting differs."""

from __future__ import annotations

import asyncio
import functools
from collections.abc import AsyncIterator, Callable, Coroutine, Mapping, Sequence
from types import TracebackType
from typing import Any, Concatenate, ParamSpec, TypeVar

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

P = ParamSpec("P")
T = TypeVar("T")


def _bind(
    build: Callable[P, Call[T]],
) -> Callable[Concatenate[AsyncClient, P], Coroutine[Any, Any, T]]:
    @functools.wraps(build)
    async def method(self: AsyncClient, /, *args: P.args, **kwargs: P.kwargs) -> T:
        return await self._send(build(*args, **kwargs))

    return _answering(method, build)


class AsyncClient:
    """A docingest service, from asyncio; the methods of `Client`, awaited."""

    def __init__(
        self,
        base_url: str | None = None,
        *,
        api_key: str | None = None,
        principals: Sequence[str] | None = None,
        timeout: httpx.Timeout | float = DEFAULT_TIMEOUT,
        retry: RetryPolicy = DEFAULT_RETRY,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self.base_url = (base_url or default_base_url()).rstrip("/")
        self.retry = retry
        self._http = httpx.AsyncClient(
            base_url=self.base_url,
            headers=client_headers(api_key, principals),
            timeout=timeout,
            transport=transport,
        )

    async def aclose(self) -> None:
        await self._http.aclose()

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()

    async def _send(self, call: Call[T]) -> T:
        retries = 0
        while True:
            try:
                with call.request_options() as options:
                    response = await self._http.request(call.method, call.path, **options)
            except httpx.TransportError as exc:
                raise transport_error(exc, self.base_url) from exc
            delay = self.retry.delay(call, response, retries)
            if delay is None:
                return call.finish(response)
            retries += 1
            await asyncio.sleep(delay)

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

    async def wait(
        self,
        job: str | Job | UploadAccepted,
        *,
        timeout: float = 600.0,
        poll_interval: float = 0.5,
        on_progress: ProgressCallback | None = None,
        raise_on_failure: bool = True,
    ) -> Job:
        """As `Client.wait`."""
        waiter = Waiter(timeout, poll_interval, on_progress)
        job_id = job_id_of(job)
        while True:
            state = await self._send(ops.get_job(job_id))
            if waiter.observe(state):
                if raise_on_failure and state.status != "completed":
                    raise JobFailed(state)
                return state
            await asyncio.sleep(waiter.pause())

    async def ingest(
        self,
        index: str,
        file: Source,
        *,
        timeout: float = 600.0,
        on_progress: ProgressCallback | None = None,
        **upload: Any,
    ) -> Job:
        """As `Client.ingest`."""
        accepted = await self.upload(index, file, **upload)
        return await self.wait(accepted, timeout=timeout, on_progress=on_progress)

    async def _walk(self, pager: Pager[T]) -> AsyncIterator[T]:
        while (call := pager.next_call()) is not None:
            for item in pager.take(await self._send(call)):
                yield item

    def iter_documents(
        self, index: str, *, filter: Mapping[str, Any] | None = None, page_size: int = 100
    ) -> AsyncIterator[Document]:
        """As `Client.iter_documents`, for `async for`."""
        pages = ops.documents_page(index, filter, page_size)
        return self._walk(Pager(pages, lambda page: page.documents))

    def iter_chunks(
        self, index: str, document_id: str, *, page_size: int = 100
    ) -> AsyncIterator[Chunk]:
        return self._walk(Pager(ops.chunks_page(index, document_id, page_size), lambda p: p.chunks))

    def iter_jobs(
        self, *, index: str | None = None, status: str | None = None, page_size: int = 100
    ) -> AsyncIterator[Job]:
        return self._walk(Pager(ops.jobs_page(index, status, page_size), lambda page: page.jobs))
