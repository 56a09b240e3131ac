"""Embedding providers behind `pipeline.embedders.base.Embedder`."""
