"""Opening Qdrant (a server, ":memory:", or a local directory held by one process) and
translating qdrant-client's errors into docingest's, once, at the boundary.

Local mode is qdrant-client's in-process engine: one process per directory, and not
thread-safe on its own. A lock file holding the owner's pid is taken before the engine loads
anything, so a second process fails at once with a message naming the first, instead of
qdrant-client's RuntimeError after loading every collection into memory.

Local mode persists each point in its own SQLite transaction, and with SQLite's defaults every
commit waits for an fsync (18 ms here: a 1,000-chunk document took 18 s to write and as long
again to publish). `tune_local_storage` switches each collection's database to write-ahead
logging with synchronous=NORMAL (0.1 ms per commit), which stays consistent and durable across
a crash of the process; only the last commits before a power cut or OS crash may be lost.
"""

from __future__ import annotations

import os
import sqlite3
import threading
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import httpx
import portalocker
from qdrant_client import QdrantClient
from qdrant_client.http.exceptions import ResponseHandlingException, UnexpectedResponse

from pipeline.errors import DependencyUnavailable, IndexNotFound, StoreLocked
from pipeline.settings import Settings


class ProcessLock:
    """An exclusive lock on a local store directory; the lock file holds the owner's pid."""

    def __init__(self, path: Path) -> None:
        path.mkdir(parents=True, exist_ok=True)
        self._file: IO[str] | None = open(path / "docingest.lock", "a+")
        try:
            portalocker.lock(
                self._file, portalocker.LockFlags.EXCLUSIVE | portalocker.LockFlags.NON_BLOCKING
            )
        except portalocker.exceptions.LockException as exc:
            self._file.seek(0)
            holder = self._file.read().strip() or None
            self._file.close()
            raise StoreLocked(locked_message(path, holder)) from exc
        self._file.seek(0)
        self._file.truncate()
        self._file.write(str(os.getpid()))
        self._file.flush()

    def release(self) -> None:
        if self._file is not None:
            portalocker.unlock(self._file)
            self._file.close()
            self._file = None


def locked_message(path: Path, holder: str | None) -> str:
    who = f"another process (pid {holder})" if holder else "another process"
    return (
        f"The local Qdrant store at {path} is in use by {who}; stop it or set "
        "DOCINGEST_QDRANT_URL to share a Qdrant server."
    )


@dataclass
class Connection:
    """A qdrant-client and how to use it: `guard()` around every call, `close()` at the end."""

    client: QdrantClient
    location: str
    local: bool
    process_lock: ProcessLock | None = None
    _lock: AbstractContextManager[Any] = field(init=False, repr=False)
    _closed: bool = field(default=False, init=False)

    def __post_init__(self) -> None:
        # local mode serialises every call; a server client (httpx) is shared freely
        self._lock = threading.RLock() if self.local else nullcontext()

    @classmethod
    def open(cls, settings: Settings) -> Connection:
        """Connect to `qdrant_url`, or open ":memory:", or local mode under `data_dir/qdrant`."""
        url = settings.qdrant_url
        if url == ":memory:":
            client = QdrantClient(location=url, force_disable_check_same_thread=True)
            return cls(client, url, local=True)
        if url:
            key = settings.qdrant_api_key.get_secret_value() if settings.qdrant_api_key else None
            # /readyz reports an unreachable server; no version probe (and warning) at start-up
            return cls(QdrantClient(url=url, api_key=key, check_compatibility=False), url, False)
        path = settings.data_dir / "qdrant"
        process_lock = ProcessLock(path)
        try:
            # every call runs under our lock, so SQLite's same-thread check is not needed
            client = QdrantClient(path=str(path), force_disable_check_same_thread=True)
        except RuntimeError as exc:  # qdrant-client's own lock, held by a non-docingest client
            process_lock.release()
            raise StoreLocked(locked_message(path, None)) from exc
        except BaseException:
            process_lock.release()
            raise
        connection = cls(client, str(path), local=True, process_lock=process_lock)
        connection.tune_local_storage()
        return connection

    def tune_local_storage(self) -> None:
        """Put every local collection's SQLite file in WAL mode with synchronous=NORMAL.

        This reaches into qdrant-client's local engine (`QdrantLocal.collections[...].storage
        .storage`); if a release renames those, writes are merely slow again.
        """
        engine = getattr(self.client, "_client", None)
        with self._lock:
            for collection in list(getattr(engine, "collections", {}).values()):
                database = getattr(getattr(collection, "storage", None), "storage", None)
                if isinstance(database, sqlite3.Connection):
                    database.execute("PRAGMA journal_mode=WAL")
                    database.execute("PRAGMA synchronous=NORMAL")

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
            self.client.close()
            if self.process_lock is not None:
                self.process_lock.release()

    @contextmanager
    def guard(self, index: str | None = None) -> Iterator[QdrantClient]:
        """Yield the client under the local-mode lock; translate its errors about `index`."""
        with self._lock:
            if self._closed:
                raise RuntimeError("the vector store is closed")
            try:
                yield self.client
            except UnexpectedResponse as exc:
                status = exc.status_code
                if status == 404 and index is not None:
                    raise IndexNotFound(f"Index '{index}' does not exist.") from exc
                if status is None or status == 429 or status >= 500:
                    raise DependencyUnavailable(
                        f"Qdrant at {self.location} answered {status}; try again shortly."
                    ) from exc
                raise
            except (ResponseHandlingException, httpx.TransportError) as exc:
                raise DependencyUnavailable(
                    f"Qdrant at {self.location} is unreachable ({exc}); check that it runs."
                ) from exc
            except ValueError as exc:  # local mode's way of saying a collection is missing
                if index is not None and str(exc).endswith("not found"):
                    raise IndexNotFound(f"Index '{index}' does not exist.") from exc
                raise

    @contextmanager
    def locked(self) -> Iterator[None]:
        """Hold the local-mode lock across several calls (reentrant; a no-op for a server)."""
        with self._lock:
            yield
