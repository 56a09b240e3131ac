"""Open an OLE2 compound file (legacy Office, Outlook `.msg`) without trusting it.

olefile reads the sector allocation tables, the directory and the streams; it is opened with
`raise_defects=DEFECT_INCORRECT`, so that a chain that loops, a FAT entry pointing at itself,
a stream declared larger than the file or a directory entry referenced twice is an error
(`corrupt_document`) instead of something olefile logs and reads around: a self-referencing
FAT sector read "around" repeats the same 512 bytes as often as the declared size asks, up to
4 GiB. Streams are read whole (`read`), each bounded by the file's own size: a stream cannot
hold more sectors than the file has.
"""

from __future__ import annotations

import io
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import olefile

from pipeline.errors import CorruptDocument

OLE2_MAGIC = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1"

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
        data: bytes = ole.openstream(path).read()
    except (OSError, ValueError, IndexError, KeyError, TypeError) as exc:
        raise CorruptDocument(f"The {label} is damaged and cannot be read ({exc}).") from exc
    return data
