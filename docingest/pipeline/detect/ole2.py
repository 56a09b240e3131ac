"""Open an OLE2 compound file (legacy Office, Outlook `.msg`) without trusting it.

olefile reads the sector allocation tables, the directory and the streams; it is opened with
`raise_defects=DEFECT_INCORRECT`, so that a stream declared larger than the file, a sector
index off the table or a directory entry referenced twice (a directory loop) is an error
(`corrupt_document`) instead of something olefile logs and reads around. olefile follows a
stream's chain for as many sectors as the declared size asks, so a FAT entry pointing at
itself would read one sector over and over: before a stream is read, its chain is walked
(`_check_chain`) and refused if it meets a sector twice or does not end where its size says.
"""

from __future__ import annotations

import io
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import olefile

from docingest.pipeline.errors import CorruptDocument

OLE2_MAGIC = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1"

_END_OF_CHAIN = 0xFFFFFFFE

TREE_RECURSION_LIMIT = 20_000
"""Python frames olefile may use while it builds the directory tree: it recurses per sibling
and per storage (a few frames for each level of a balanced tree), so an Outlook message with
200 messages attached one inside the other needs ~1,500, past the default 1,000. Python 3.11
runs these frames without the C stack; a deeper tree is `corrupt_document`."""


@contextmanager
def open_ole2(data: bytes, *, label: str) -> Iterator[Any]:
    """The compound file in `data` as an `olefile.OleFileIO`; `label` names it in errors."""
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, TREE_RECURSION_LIMIT))
    try:
        ole = olefile.OleFileIO(io.BytesIO(data), raise_defects=olefile.DEFECT_INCORRECT)
    except (OSError, ValueError, IndexError, KeyError, TypeError) as exc:  # OleFileError: OSError
        raise CorruptDocument(f"The {label} is damaged and cannot be read ({exc}).") from exc
    except RecursionError as exc:
        raise CorruptDocument(
            f"The {label}'s storages nest too deeply (thousands of levels) to read."
        ) from exc
    finally:
        sys.setrecursionlimit(limit)
    try:
        yield ole
    finally:
        ole.close()


def read_stream(ole: Any, path: str | list[str], *, label: str) -> bytes | None:
    """A stream's bytes, or None when there is no such stream; a damaged chain is
    `CorruptDocument`."""
    try:
        if not ole.exists(path):
            return None
        _check_chain(ole, ole.direntries[ole._find(path)], label=label)
        data: bytes = ole.openstream(path).read()
    except (OSError, ValueError, IndexError, KeyError, TypeError) as exc:
        raise CorruptDocument(f"The {label} is damaged and cannot be read ({exc}).") from exc
    return data


def _check_chain(ole: Any, entry: Any, *, label: str) -> None:
    """Refuse a stream whose sector chain loops or leaves the table before its declared size:
    olefile follows a chain for as many sectors as the size says, so a FAT entry pointing at
    itself would read one sector over and over, yielding garbage rather than an error."""
    if entry.size < ole.minisectorcutoff:
        root = ole.root
        _walk(ole.fat, root.isectStart, root.size, ole.sectorsize, label)  # the mini stream
        if ole.minifat is None:
            ole.loadminifat()
        _walk(ole.minifat, entry.isectStart, entry.size, ole.minisectorsize, label)
    else:
        _walk(ole.fat, entry.isectStart, entry.size, ole.sectorsize, label)


def _walk(table: Any, start: int, size: int, sector_size: int, label: str) -> None:
    seen: set[int] = set()
    sector = start
    for _ in range(-(-size // sector_size)):
        if sector in seen or not 0 <= sector < len(table):
            raise CorruptDocument(
                f"The {label} is damaged: a stream's sector chain loops or runs off its table."
            )
        seen.add(sector)
        sector = table[sector]
    if size and sector != _END_OF_CHAIN:  # longer than declared: it may loop back
        raise CorruptDocument(
            f"The {label} is damaged: a stream's sector chain runs past its declared size."
        )
