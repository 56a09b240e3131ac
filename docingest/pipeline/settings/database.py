"""The PostgreSQL store's settings (`DOCINGEST_DATABASE_*`), a base of
`docingest.pipeline.settings.Settings`.

Kept in their own module only so that the settings module stays under the module-size
limit; they are read, validated and documented with the rest.
"""

from __future__ import annotations

from typing import Self

from pydantic import Field, SecretStr, field_validator, model_validator
from pydantic_settings import BaseSettings

SCHEMA_NAME = r"[a-z_][a-z0-9_]{0,47}"


class DatabaseSettings(BaseSettings):
    """Where the PostgreSQL store is and how it is used (`docingest.pipeline.store.postgres`)."""

    database_url: SecretStr | None = None
    """A PostgreSQL server with pgvector (0.7 or later), as `postgresql://user:password@host:
    5432/database`: set, every index is stored there instead of in Qdrant, and every API and
    worker process may share it (docs/design/decisions/0018-postgres-store.md). Unset: Qdrant
    (the embedded store, or `DOCINGEST_QDRANT_URL`)."""

    database_schema: str = Field(default="docingest", pattern=SCHEMA_NAME)
    """The PostgreSQL schema holding docingest's tables (created on first use), so several
    deployments can share one database, as `collection_prefix` does on a Qdrant server."""

    database_pool_size: int = Field(default=8, ge=1, le=1000)
    """Connections each process keeps open at most; a call waits for a free one up to
    `database_pool_timeout_seconds`."""

    database_pool_timeout_seconds: float = Field(default=30.0, gt=0)
    """Seconds a call waits for a free connection (or for the server to answer a new one)
    before it fails as `dependency_unavailable` (a job is retried)."""

    database_statement_timeout_seconds: float = Field(default=60.0, gt=0)
    """Seconds one SQL statement may run before the server cancels it
    (`dependency_unavailable`; a job is retried)."""

    database_hnsw_ef_search: int = Field(default=100, ge=1, le=1000)
    """Candidates pgvector's HNSW search keeps (`hnsw.ef_search`, raised to a search's limit
    when that is larger): more is closer to an exact search and slower."""

    database_generation_rows: int = Field(default=5_000, ge=100)
    """Rows an index takes into its open generation, which has no HNSW index and is searched
    exactly, before it is sealed and its graph built in bulk, off the write path (pgvector's
    row-by-row insert into the graph bounded ingestion; BENCHMARKS.md, "PostgreSQL store"):
    larger makes fewer graphs to search and a longer exact scan of the newest rows."""

    database_build_memory_mb: int = Field(default=512, ge=64)
    """`maintenance_work_mem` of a generation's graph build, in MiB, on the server: the
    graph of 10,000 vectors of 1,536 dimensions takes about 70 MiB; one that does not fit
    is finished on disk, several times slower."""

    database_build_workers: int = Field(default=1, ge=0, le=8)
    """Parallel workers of a graph build besides its own process
    (`max_parallel_maintenance_workers`): each takes a CPU of the server while it builds.
    0 leaves a CPU to searches and writes but measured worse on two CPUs, as the graphs came
    later and more rows were searched exactly meanwhile (BENCHMARKS.md, "Searches during
    ingestion: the tail")."""

    database_unbuilt_generations: int = Field(default=0, ge=0)
    """Sealed generations that may wait for their graph before writers to that index wait
    for the builds (0: writers never wait). Those generations are searched exactly, so
    while builds lag behind ingestion every search grows slower; a bound trades ingestion
    speed for the tail of searches during it: at 1, the longest search during ingestion
    0.58× as long at 0.53× the chunks/s (BENCHMARKS.md, "Searches during ingestion: the
    tail")."""

    @field_validator("database_url", mode="before")
    @classmethod
    def _empty_is_unset(cls, url: object) -> object:
        return None if url == "" else url  # `DOCINGEST_DATABASE_URL=` in an env file

    @field_validator("database_url")
    @classmethod
    def _postgres_url(cls, url: SecretStr | None) -> SecretStr | None:
        if url is not None and not url.get_secret_value().startswith(
            ("postgresql://", "postgres://")
        ):
            raise ValueError("database_url must start with postgresql:// (or postgres://)")
        return url

    @model_validator(mode="after")
    def _one_store(self) -> Self:
        if self.database_url is not None and getattr(self, "qdrant_url", None):
            raise ValueError(
                "set database_url (PostgreSQL) or qdrant_url (a Qdrant server), not both"
            )
        return self

    @property
    def shared_store(self) -> bool:
        """Whether the store is a server every process may use (PostgreSQL or Qdrant), not
        the embedded store one process owns."""
        return self.database_url is not None or bool(getattr(self, "qdrant_url", None))
