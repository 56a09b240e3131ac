"""Embedding providers behind `docingest.pipeline.embedders.base.Embedder`."""
