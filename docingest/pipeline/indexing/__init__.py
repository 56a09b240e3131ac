"""Indexing a prepared document as a new version: the entry, the window loop, a window's
vectors, the writer thread."""

from docingest.pipeline.indexing.request import IndexHooks, IndexRequest, IndexResult
from docingest.pipeline.indexing.run import index_document

__all__ = ["IndexHooks", "IndexRequest", "IndexResult", "index_document"]
