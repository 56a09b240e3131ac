"""Windows of a streamed document: regroup its chunk batches, and store one window on a
thread while the next is embedded (`docingest.pipeline.indexing.run`)."""

from __future__ import annotations

import contextvars
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from types import TracebackType
from typing import Generic, TypeVar

Item = TypeVar("Item")


def windows(batches: Iterable[Sequence[Item]], size: int) -> Iterator[list[Item]]:
    """Yield the items of `batches`, in order, in lists of `size` (the last may be shorter)."""
    if size <= 0:
        raise ValueError(f"a window holds at least one item, not {size}")
    window: list[Item] = []
    for batch in batches:
        for item in batch:
            window.append(item)
            if len(window) == size:
                yield window
                window = []
    if window:
        yield window


class HeldCount:
    """How many items are held between taking them from a stream and writing them, told to
    `report` at every change (from any thread)."""

    def __init__(self, report: Callable[[int], None]) -> None:
        self._report = report
        self._lock = threading.Lock()
        self.held = 0

    def taking(self, batches: Iterable[Sequence[Item]]) -> Iterator[Sequence[Item]]:
        """Yield `batches`, counting each as held once taken."""
        for batch in batches:
            self.add(len(batch))
            yield batch

    def add(self, count: int) -> None:
        with self._lock:
            self.held += count
            self._report(self.held)


class BackgroundWriter(Generic[Item]):
    """Runs `write(window)` on one thread, one window at a time.

    `put` waits for the previous window's write (so at most one is in flight: that and the
    window being prepared are all the caller holds) and raises its error. Leaving the `with`
    block waits for the write in flight, so nothing lands after the caller has moved on (e.g.
    to discard what was written); an error of that write is raised unless another is already
    propagating. `busy_seconds` is the time spent writing.
    """

    def __init__(self, write: Callable[[list[Item]], None], *, name: str = "writer") -> None:
        self._write = write
        self._pool = ThreadPoolExecutor(1, thread_name_prefix=name)
        self._pending: Future[None] | None = None
        self.busy_seconds = 0.0
        self.in_flight = 0
        """Items handed to the thread and not yet written."""

    def put(self, window: list[Item]) -> None:
        self.wait()
        self.in_flight = len(window)
        context = contextvars.copy_context()  # the thread's log lines carry the job's fields
        self._pending = self._pool.submit(context.run, self._timed, window)

    def wait(self) -> None:
        """Wait for the write in flight, if any; raise its error."""
        pending, self._pending = self._pending, None
        if pending is not None:
            pending.result()
            self.in_flight = 0

    def _timed(self, window: list[Item]) -> None:
        started = time.perf_counter()
        try:
            self._write(window)
        finally:
            self.busy_seconds += time.perf_counter() - started

    def __enter__(self) -> BackgroundWriter[Item]:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        try:
            self.wait()
        except Exception:
            if exc is None:
                raise
        finally:
            self._pool.shutdown(wait=True)


class WindowSink(Generic[Item]):
    """Where a document's windows go: held in memory while the document stays within `limit`
    items (the caller then writes them all at once, live: `VectorStore.write_live`), and past
    it, what was held and every later window handed to `writer`, to be stored staged. A
    `limit` of 0 hands every window to `writer`."""

    def __init__(self, writer: BackgroundWriter[Item], *, limit: int) -> None:
        self.writer = writer
        self.limit = limit
        self.held: list[Item] | None = [] if limit > 0 else None
        """The windows held so far, in order; None once they went to `writer`."""

    def put(self, window: list[Item]) -> None:
        if self.held is not None:
            if len(self.held) + len(window) <= self.limit:
                self.held.extend(window)
                return
            held, self.held = self.held, None
            if held:
                self.writer.put(held)
        self.writer.put(window)

    @property
    def unwritten(self) -> int:
        """Items handed over and not yet written: held, or in the writer's hands."""
        return len(self.held or ()) + self.writer.in_flight
