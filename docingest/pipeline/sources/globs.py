"""Include and exclude globs on an item's key or relative path (`fnmatch`: `*` also matches
"/", so `*.pdf` takes PDFs at any depth)."""

from __future__ import annotations

from collections.abc import Sequence
from fnmatch import fnmatchcase

MAX_GLOBS = 64


def selected(key: str, include: Sequence[str], exclude: Sequence[str]) -> bool:
    """Whether `key` matches one of `include` (any key when it is empty) and none of
    `exclude`."""
    if include and not any(fnmatchcase(key, glob) for glob in include):
        return False
    return not any(fnmatchcase(key, glob) for glob in exclude)
