"""The `folder` source: a directory on the server, under one of `source_folder_roots`.

An item is a regular file; its document id is its path relative to `path` (POSIX form), its
fingerprint its modification time and size (what `docingest sync` on a client reads a hash
for; a server folder may be large, and a change of bytes without one of both is rare enough
to leave to a forced run). Symbolic links are followed only to files that stay under the
root, so a link cannot read the rest of the server.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from docingest.pipeline.errors import InvalidSource, SourceUnreadable
from docingest.pipeline.settings import Settings
from docingest.pipeline.sources.base import (
    Fetched,
    Found,
    Item,
    ItemFailed,
    Known,
    SourceType,
    copy_limited,
    max_item_bytes,
)
from docingest.pipeline.sources.globs import MAX_GLOBS, selected


class FolderConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    path: str = Field(min_length=1, max_length=4096)
    include: list[str] = Field(default_factory=list, max_length=MAX_GLOBS)
    exclude: list[str] = Field(default_factory=list, max_length=MAX_GLOBS)


def _root_of(path: Path, settings: Settings) -> Path | None:
    for root in settings.source_folder_roots:
        real_root = Path(os.path.realpath(root))
        if path == real_root or path.is_relative_to(real_root):
            return real_root
    return None


def check(config: FolderConfig, settings: Settings) -> None:
    if not settings.source_folder_roots:
        raise InvalidSource(
            "No folder may be read: an operator allows folders by setting "
            "DOCINGEST_SOURCE_FOLDER_ROOTS."
        )
    path = Path(config.path)
    if not path.is_absolute():
        raise InvalidSource("A folder source's path must be absolute.")
    if _root_of(Path(os.path.realpath(path)), settings) is None:
        raise InvalidSource(
            f"The folder {config.path!r} is not under DOCINGEST_SOURCE_FOLDER_ROOTS."
        )


class FolderReader:
    def __init__(self, config: FolderConfig, settings: Settings) -> None:
        self._config = config
        self._base = Path(os.path.realpath(config.path))
        self._root = _root_of(self._base, settings)
        self._limit = max_item_bytes(settings)

    def walk(self, known: Known, staging: Callable[[], Path]) -> Iterator[Found]:
        if self._root is None or not self._base.is_dir():
            raise SourceUnreadable(
                "folder_not_found", f"The folder {self._config.path!r} is not a directory."
            )
        for directory, folders, files in os.walk(self._base, onerror=None):
            folders.sort()
            for name in sorted(files):
                path = Path(directory) / name
                real = Path(os.path.realpath(path))
                if not real.is_relative_to(self._root):
                    continue  # a link out of the allowed root
                relative = path.relative_to(self._base).as_posix()
                if not selected(relative, self._config.include, self._config.exclude):
                    continue
                try:
                    stat = real.stat()
                except OSError:
                    continue  # gone since listed
                if not real.is_file():
                    continue
                yield Found(
                    Item(
                        document_id=relative,
                        uri=str(path),
                        fingerprint=f"{stat.st_mtime_ns}:{stat.st_size}",
                        filename=name,
                        size=stat.st_size,
                        last_modified=_rfc3339(stat.st_mtime),
                    )
                )

    def fetch(self, item: Item, destination: Path) -> Fetched:
        try:
            with open(os.path.realpath(item.uri), "rb") as handle:
                return copy_limited(handle.read, destination, limit=self._limit)
        except OSError as exc:
            raise ItemFailed("source_error", f"Cannot read {item.uri}: {exc.strerror}.") from exc

    def close(self) -> None:
        pass


def _rfc3339(seconds: float) -> str:
    from datetime import UTC, datetime

    return (
        datetime.fromtimestamp(seconds, tz=UTC).isoformat(timespec="seconds").replace("+00:00", "Z")
    )


FOLDER = SourceType(
    name="folder",
    config=FolderConfig,
    secrets=frozenset(),
    check=check,
    open=FolderReader,
)
