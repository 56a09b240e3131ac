"""The file lock that makes one process the owner of an embedded store's directory."""

from __future__ import annotations

import os
from pathlib import Path
from typing import IO

import portalocker

from docingest.pipeline.errors import StoreLocked

LOCK_FILE = "docingest.lock"


class ProcessLock:
    """An exclusive lock on a store directory; the lock file holds the owner's pid.

    Taken before the engine loads anything, so a second process fails at once with a message
    naming the first instead of an engine error after loading every shard.
    """

    def __init__(self, path: Path) -> None:
        path.mkdir(parents=True, exist_ok=True)
        self._file: IO[str] | None = open(path / LOCK_FILE, "a+")
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
        f"The embedded store at {path} is in use by {who}; stop it or set "
        "DOCINGEST_QDRANT_URL (a Qdrant server) or DOCINGEST_DATABASE_URL (PostgreSQL) to share "
        "a store."
    )
