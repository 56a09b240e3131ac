"""docingest pipeline: the ingestion stages as plain, testable Python, and a flat API over them.

Data flows detect → extract → metadata → chunk → embed → store; nothing here imports
`api` or `workers`. From Python:

    from docingest.pipeline import open_pipeline

    with open_pipeline() as docs:  # settings from the DOCINGEST_* environment
        docs.ingest("examples", "examples/rfc6455-websocket.txt")
        for hit in docs.search("examples", "closing handshake status code").results:
            print(hit.score, hit.document_id, hit.text[:80])

The names below are imported on first use (PEP 562), so `import pipeline` loads neither the
vector store's client nor the embedding runtime.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from docingest.common.lazy import lazy_exports

if TYPE_CHECKING:
    from docingest.pipeline.chunking import Chunk, ChunkingSpec
    from docingest.pipeline.embedders.base import Embedder, EmbeddingConfig
    from docingest.pipeline.embedders.registry import build_embedder, register_provider
    from docingest.pipeline.errors import IngestError, PermanentError, TransientError
    from docingest.pipeline.facade import Pipeline, open_pipeline
    from docingest.pipeline.indexing import IndexResult
    from docingest.pipeline.prepare import PreparedDocument, prepare_document
    from docingest.pipeline.rerank import RerankConfig, register_reranker
    from docingest.pipeline.search import SearchRequest, SearchResponse
    from docingest.pipeline.settings import Settings, get_settings
    from docingest.pipeline.store import IndexConfig

_EXPORTS = {  # name → the private module that defines it (a test keeps it equal to __all__)
    "Chunk": "docingest.pipeline.chunking",
    "ChunkingSpec": "docingest.pipeline.chunking",
    "Embedder": "docingest.pipeline.embedders.base",
    "EmbeddingConfig": "docingest.pipeline.embedders.base",
    "IndexConfig": "docingest.pipeline.store",
    "IndexResult": "docingest.pipeline.indexing",
    "IngestError": "docingest.pipeline.errors",
    "PermanentError": "docingest.pipeline.errors",
    "Pipeline": "docingest.pipeline.facade",
    "PreparedDocument": "docingest.pipeline.prepare",
    "RerankConfig": "docingest.pipeline.rerank",
    "SearchRequest": "docingest.pipeline.search",
    "SearchResponse": "docingest.pipeline.search",
    "Settings": "docingest.pipeline.settings",
    "TransientError": "docingest.pipeline.errors",
    "build_embedder": "docingest.pipeline.embedders.registry",
    "get_settings": "docingest.pipeline.settings",
    "open_pipeline": "docingest.pipeline.facade",
    "prepare_document": "docingest.pipeline.prepare",
    "register_provider": "docingest.pipeline.embedders.registry",
    "register_reranker": "docingest.pipeline.rerank.registry",
}

__all__ = [
    "Chunk",
    "ChunkingSpec",
    "Embedder",
    "EmbeddingConfig",
    "IndexConfig",
    "IndexResult",
    "IngestError",
    "PermanentError",
    "Pipeline",
    "PreparedDocument",
    "RerankConfig",
    "SearchRequest",
    "SearchResponse",
    "Settings",
    "TransientError",
    "build_embedder",
    "get_settings",
    "open_pipeline",
    "prepare_document",
    "register_provider",
    "register_reranker",
]


__getattr__, __dir__ = lazy_exports("docingest.pipeline", _EXPORTS, globals())
