"""`ChunkingSpec`: how an index's documents are split."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, model_validator

from pipeline.settings import ChunkUnit, Settings


class ChunkingSpec(BaseModel):
    """How an index's documents are split; `chunk_overlap` is in `unit`."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    chunk_size: int = Field(default=1000, gt=0)
    chunk_overlap: int = Field(default=150, ge=0)
    unit: ChunkUnit = ChunkUnit.CHARS

    @model_validator(mode="after")
    def _check_overlap(self) -> ChunkingSpec:
        if self.chunk_overlap >= self.chunk_size:
            raise ValueError("chunk_overlap must be smaller than chunk_size")
        return self

    @classmethod
    def from_settings(cls, settings: Settings) -> ChunkingSpec:
        return cls(
            chunk_size=settings.chunk_size,
            chunk_overlap=settings.chunk_overlap,
            unit=settings.chunk_unit,
        )
