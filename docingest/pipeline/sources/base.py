"""What every source type provides: a config model, the names of its secret fields, a check
run when a source is saved, and a reader that lists items and fetches one.

A run (`docingest.pipeline.sources.sync`) is the same for every type: it lists, compares
each item's fingerprint with the one kept from the last run, fetches only what is new or
changed, and hands it to the ordinary job path. A type only says what its items are.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from pydantic import BaseModel

from docingest.pipeline.errors import IngestError
from docingest.pipeline.settings import Settings

HASH_CHUNK = 1 << 20


class ItemFailed(IngestError):
    """One item cannot be read (gone since listing, too large, refused): it counts as failed
    and the run goes on. `code` is given, as for `SourceUnreadable`."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


@dataclass(frozen=True, slots=True)
class Item:
    """One thing a source holds, as its listing shows it."""

    document_id: str
    """The document it becomes: the object key, the canonical URL, the relative path."""
    uri: str
    """Where it is, for people and the `source.uri` metadata."""
    fingerprint: str
    """What changes when the item does (ETag and size; mtime and size; a page's validators)."""
    filename: str
    etag: str | None = None
    last_modified: str | None = None
    size: int | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)
    """Kept with the fingerprint for the next run (a web page's links, its validators)."""


@dataclass(frozen=True, slots=True)
class Fetched:
    """An item's bytes, staged."""

    size: int
    sha256: str
    content_type: str | None = None


@dataclass(frozen=True, slots=True)
class Found:
    """What a reader's walk yields: an item, and when the walk already knows it, whether it
    is unchanged (a 304) or its bytes (a crawler reads a page to find its links)."""

    item: Item
    unchanged: bool = False
    staged: Path | None = None
    fetched: Fetched | None = None
    failure: ItemFailed | None = None
    """The walk could not read it (it counts as failed, and keeps its document)."""


Known = Mapping[str, Mapping[str, Any]]
"""The records kept from earlier runs: document id → `{"fp": fingerprint, **extra}`."""


class SourceReader(Protocol):
    def walk(self, known: Known, staging: Callable[[], Path]) -> Iterator[Found]:
        """List the source. `known` is what earlier runs kept; `staging()` gives a fresh path
        for bytes a walk must read anyway. Raise `SourceUnreadable` when the source cannot be
        listed at all."""
        ...

    def fetch(self, item: Item, destination: Path) -> Fetched:
        """Write the item's bytes to `destination`; `ItemFailed` if it cannot."""
        ...

    def close(self) -> None: ...


@dataclass(frozen=True, slots=True)
class SourceType:
    """One registered type (`docingest.pipeline.sources.registry`)."""

    name: str
    config: type[BaseModel]
    """Its config, validated when a source is saved (`extra="forbid"`)."""
    secrets: frozenset[str]
    """Config fields never shown, logged or exported (shown as "***")."""
    check: Callable[[Any, Settings], None]
    """Refuse a config that cannot be used (`InvalidSource`): a private address, a folder
    outside the allowed roots. Run when saved, and again at the start of each run."""
    open: Callable[[Any, Settings], SourceReader]


def max_item_bytes(settings: Settings) -> int:
    return settings.source_max_item_bytes or settings.max_upload_bytes


def copy_limited(read: Callable[[int], bytes], destination: Path, *, limit: int) -> Fetched:
    """Copy a stream to `destination`, hashing it; `ItemFailed(document_too_large)` past
    `limit` bytes (the partial file is removed)."""
    digest = hashlib.sha256()
    size = 0
    try:
        with destination.open("wb") as out:
            while chunk := read(HASH_CHUNK):
                size += len(chunk)
                if size > limit:
                    raise ItemFailed(
                        "document_too_large", f"The item is larger than the limit of {limit} bytes."
                    )
                digest.update(chunk)
                out.write(chunk)
    except BaseException:
        destination.unlink(missing_ok=True)
        raise
    return Fetched(size=size, sha256=digest.hexdigest())
