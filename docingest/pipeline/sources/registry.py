"""Source types by name: a new type is one `register_source_type` call, as a new embedding
provider is one `register_provider` call."""

from __future__ import annotations

from docingest.pipeline.errors import InvalidSource
from docingest.pipeline.sources.base import SourceType

_TYPES: dict[str, SourceType] = {}


def register_source_type(source_type: SourceType) -> None:
    """Make `source_type` usable by its name in a source's `type`."""
    _TYPES[source_type.name] = source_type


def source_type(name: str) -> SourceType:
    """The registered type `name`; `InvalidSource` naming the known ones if there is none."""
    _register_builtins()
    try:
        return _TYPES[name]
    except KeyError:
        raise InvalidSource(
            f"Unknown source type {name!r}; the types are {sorted(_TYPES)}."
        ) from None


def source_types() -> list[str]:
    _register_builtins()
    return sorted(_TYPES)


def _register_builtins() -> None:
    if "folder" in _TYPES:
        return
    from docingest.pipeline.sources.folder import FOLDER
    from docingest.pipeline.sources.s3 import S3
    from docingest.pipeline.sources.web import WEB

    for builtin in (FOLDER, S3, WEB):
        _TYPES.setdefault(builtin.name, builtin)
