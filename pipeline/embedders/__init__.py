"""Embedding providers behind `pipeline.embedding.Embedder`."""
