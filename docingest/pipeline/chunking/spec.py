"""`ChunkingSpec`: how an index's documents are split."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, model_validator

from docingest.pipeline.settings import MAX_CHUNK_SIZE, ChunkUnit, Settings, check_chunk_overlap

_DEFAULTS = Settings.model_fields
"""A part left out takes the default of the setting it mirrors: `Settings` holds them all."""


class ChunkingSpec(BaseModel):
    """How an index's documents are split; `chunk_overlap` is in `unit`."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    chunk_size: int = Field(default=_DEFAULTS["chunk_size"].default, gt=0, le=MAX_CHUNK_SIZE)
    chunk_overlap: int = Field(default=_DEFAULTS["chunk_overlap"].default, ge=0)
    unit: ChunkUnit = _DEFAULTS["chunk_unit"].default

    @model_validator(mode="after")
    def _check_overlap(self) -> ChunkingSpec:
        check_chunk_overlap(self.chunk_size, self.chunk_overlap)
        return self

    @classmethod
    def from_settings(cls, settings: Settings) -> ChunkingSpec:
        """The spec of a new index under `settings`."""
        return cls(
            chunk_size=settings.chunk_size,
            chunk_overlap=settings.chunk_overlap,
            unit=settings.chunk_unit,
        )
