"""Chunking: sections, the recursive splitter, sentence ends and token counts, `ChunkingSpec`."""

from docingest.pipeline.chunking.sections import Chunk, chunk_document, chunk_text, iter_chunks
from docingest.pipeline.chunking.spec import ChunkingSpec

__all__ = ["Chunk", "ChunkingSpec", "chunk_document", "chunk_text", "iter_chunks"]
