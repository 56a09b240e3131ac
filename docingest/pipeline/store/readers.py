"""The filters that keep a caller's reads and writes to what its access allows, apart from
`docingest.pipeline.store.vector_store` so each module stays small; `VectorStore` inherits them.
"""

from __future__ import annotations

from collections.abc import Callable

from docingest.pipeline.errors import IndexNotFound
from docingest.pipeline.store.access import AccessMode, Reader, restrict
from docingest.pipeline.store.filters import SearchFilter
from docingest.pipeline.store.models import IndexConfig


class ReaderFilters:
    """`readable` and `writable`; the class using it provides `index_config`."""

    index_config: Callable[[str], IndexConfig | None]

    def readable(
        self, index: str, reader: Reader, search_filter: SearchFilter | None = None
    ) -> SearchFilter | None:
        """`search_filter` restricted to the points `reader` may read in `index`
        (`docingest.pipeline.store.access`): pass it to every read made for a caller."""
        if reader.is_admin:
            return search_filter
        return restrict(search_filter, reader.visibility(self._access_mode(index)))

    def writable(
        self, index: str, reader: Reader, search_filter: SearchFilter | None = None
    ) -> SearchFilter | None:
        """`search_filter` restricted to the documents `reader` may change or delete."""
        if reader.is_admin:
            return search_filter
        return restrict(search_filter, reader.writability(self._access_mode(index)))

    def _access_mode(self, index: str) -> AccessMode:
        config = self.index_config(index)
        if config is None:
            raise IndexNotFound(f"Index '{index}' does not exist.")
        return config.access
