"""Generations of a PostgreSQL chunk table: the HNSW graph built in bulk, off the write path.

pgvector inserts a row into an HNSW graph as it is written, about 6.6 ms a row at 1,536
dimensions here, which bounded ingestion at 89 chunks/s (BENCHMARKS.md, "PostgreSQL store").
So an index's table is partitioned by `generation` (PostgreSQL's declarative partitioning):

- writes go to the open generation, which has no HNSW index: a `COPY` there costs what the
  row and its btree/GIN entries cost. Searches scan it exactly (the planner sorts it by
  distance and merges it with the other generations' index scans), so it is kept small;
- once `database_generation_rows` rows were written into it, the writer that crossed the
  line seals it: generation k + 1 is created and becomes the open one (one small transaction,
  `seal`), and generation k gets its graph by `CREATE INDEX CONCURRENTLY`, pgvector's bulk
  build (in memory, `database_build_memory_mb`, with a parallel worker), in a thread of that
  process (`GraphBuilder`). Rows written into k meanwhile (a writer that read the old open
  generation) go into the index as `CONCURRENTLY` promises; until it is valid the planner
  scans k exactly, so searches stay complete, only slower;
- one builder per index at a time across processes: it holds a session advisory lock, which
  the server releases if the process dies. A build killed part-way leaves an invalid index,
  which the next builder drops and builds again; every process looks for unbuilt sealed
  generations when it first writes to an index (and after each seal).
"""

from __future__ import annotations

import logging
import math
import threading
import time
import zlib
from collections.abc import Callable

import psycopg
from psycopg import sql

from docingest.pipeline import metrics
from docingest.pipeline.store import postgres_terms
from docingest.pipeline.store.postgres_merges import merge_all, sealed_generations
from docingest.pipeline.store.postgres_schema import (
    create_partition,
    graph_name,
    graph_statement,
    partition_table,
)

log = logging.getLogger(__name__)

BEHIND_WAIT_SECONDS = 60.0
"""The longest a write waits for the builds (`database_unbuilt_generations`): builds that
keep failing slow writers down, never stop them."""
_BEHIND_POLL_SECONDS = 0.25
_KICK_SECONDS = 5.0  # a kick while another process builds costs a connection, not a build


def lock_class(purpose: str, schema: str) -> int:
    """The first key of the advisory locks (it, table number) that serve `purpose` in
    `schema`. Advisory locks are the database's and table numbers repeat in every schema, so
    a constant key let two deployments in one database (`database_schema`) stall and end
    each other's graph builders."""
    unsigned = zlib.crc32(f"{purpose}:{schema}".encode())
    return unsigned - (1 << 32) if unsigned >= 1 << 31 else unsigned  # PostgreSQL's int4


def build_key(schema: str) -> int:
    """The first key of the session lock (it, table number) a table's graph builder holds."""
    return lock_class("graf", schema)


def seal(
    connection: psycopg.Connection, schema: str, number: int, *, rows: int, generation: int
) -> bool:
    """Open generation `generation` + 1 of table `number` if `generation` is still the open
    one with at least `rows` written into it; whether this call did."""
    indexes = sql.Identifier(schema, "indexes")
    with connection.transaction():
        seal_key = lock_class("seal", schema)
        connection.execute("SELECT pg_advisory_xact_lock(%s, %s)", [seal_key, number])
        row = connection.execute(
            sql.SQL("SELECT generation, generation_rows FROM {} WHERE table_number = %s").format(
                indexes
            ),
            [number],
        ).fetchone()
        if row is None or int(row[0]) != generation or int(row[1]) < rows:
            return False  # sealed by another writer, or the index is gone
        create_partition(connection, schema, number, generation + 1)
        connection.execute(
            sql.SQL(
                "UPDATE {} SET generation = generation + 1, generation_rows = 0 "
                "WHERE table_number = %s"
            ).format(indexes),
            [number],
        )
    return True


def unbuilt(connection: psycopg.Connection, schema: str, number: int) -> int:
    """How many of table `number`'s sealed generations lack a valid graph (are searched
    exactly)."""
    return sum(not built for _, built in sealed_generations(connection, schema, number).values())


def stop_builders(connection: psycopg.Connection, schema: str, number: int) -> None:
    """End the sessions that build table `number`'s graphs, in any process, before the table
    is dropped: a `CREATE INDEX CONCURRENTLY` waits for the dropping transaction, which waits
    for its table lock, and PostgreSQL would abort one of the two as a deadlock. A build cut
    short leaves an invalid index, which the drop takes with its table."""
    try:
        with connection.transaction():  # a savepoint: a refusal leaves the delete going
            connection.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_locks WHERE locktype = 'advisory' "
                "AND classid::bigint = %s AND objid::bigint = %s AND objsubid = 2 "
                "AND pid <> pg_backend_pid()",
                [build_key(schema) & 0xFFFFFFFF, number],  # pg_locks shows keys unsigned
            )
    except psycopg.errors.InsufficientPrivilege:  # a builder of another role: wait for it
        log.warning("cannot end the graph builds of chunks_%s (another role's)", number)


class GraphBuilder:
    """Builds the HNSW index of every sealed generation that lacks a valid one, then merges
    generations, a thread per index, each on a connection of its own (a build outlasts any
    statement timeout)."""

    def __init__(
        self, url: str, schema: str, *, memory_mb: int, base_rows: int, workers: int = 1
    ) -> None:
        self._url = url
        self._schema = schema
        self._memory_mb = memory_mb
        self._workers = workers  # parallel maintenance workers of a build
        self._base_rows = base_rows  # a generation's rows when sealed: the merges' unit
        self._threads: dict[int, threading.Thread] = {}
        self._again: set[int] = set()
        self._lock = threading.Lock()

    def kick(self, number: int, dimensions: int) -> None:
        """Make sure table `number`'s sealed generations get their graphs (a no-op when this
        process's builder of that table is already running; it looks again before it ends)."""
        with self._lock:
            thread = self._threads.get(number)
            if thread is not None and thread.is_alive():
                self._again.add(number)
                return
            thread = threading.Thread(
                target=self._run, args=(number, dimensions), name=f"pg-graph-{number}", daemon=True
            )
            self._threads[number] = thread
            thread.start()

    def wait_behind(self, look: Callable[[], tuple[int, int, int]], *, bound: int) -> None:
        """Wait while `look()`'s first value (sealed generations of a table without their
        graph; then its number and dimensions) is `bound` or more, at most
        `BEHIND_WAIT_SECONDS`: back-pressure on writers, so that the rows searched exactly
        stay bounded while the builds lag behind ingestion."""
        started = time.monotonic()
        kicked = -math.inf
        while (found := look())[0] >= bound:
            now = time.monotonic()
            if now - started >= BEHIND_WAIT_SECONDS:
                log.warning("chunks_%s: writing on, its graph builds still behind", found[1])
                return
            if now - kicked >= _KICK_SECONDS:  # some process's builder must be at it
                self.kick(found[1], found[2])
                kicked = now
            time.sleep(_BEHIND_POLL_SECONDS)

    def wait(self, timeout: float | None = None) -> None:
        """Wait for this process's builds to end (tests, benchmarks)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        for thread in list(self._threads.values()):
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            thread.join(left)

    def _run(self, number: int, dimensions: int) -> None:
        with metrics.STORE_GRAPH_BUILDS.track_inprogress():
            self._build_all(number, dimensions)

    def _build_all(self, number: int, dimensions: int) -> None:
        try:
            while True:
                with self._lock:
                    self._again.discard(number)
                self._build_missing(number, dimensions)
                with self._lock:
                    if number not in self._again:
                        return
        except psycopg.Error as exc:  # the next write or seal tries again
            log.warning("building the HNSW graphs of chunks_%s failed: %s", number, exc)

    def _build_missing(self, number: int, dimensions: int) -> None:
        options = "-c statement_timeout=0 -c lock_timeout=0"
        with psycopg.connect(self._url, autocommit=True, options=options) as connection:
            held = connection.execute(
                "SELECT pg_try_advisory_lock(%s, %s)", [build_key(self._schema), number]
            ).fetchone()
            if not held or not held[0]:
                return  # another process builds them; it looks again before it ends
            connection.execute(
                sql.SQL("SET maintenance_work_mem = {}").format(sql.Literal(f"{self._memory_mb}MB"))
            )
            connection.execute(
                sql.SQL("SET max_parallel_maintenance_workers = {}").format(
                    sql.Literal(self._workers)
                )
            )
            sealed = sealed_generations(connection, self._schema, number)
            for generation in sorted(sealed):
                if not sealed[generation][1]:
                    self._build(connection, number, generation, dimensions)
            postgres_terms.compact(connection, self._schema, number)
            merge_all(connection, self._schema, number, dimensions, base_rows=self._base_rows)

    def _build(
        self, connection: psycopg.Connection, number: int, generation: int, dimensions: int
    ) -> None:
        statement = graph_statement(self._schema, number, generation, dimensions)
        if statement is None:
            return
        part = partition_table(self._schema, number, generation)
        name = sql.Identifier(self._schema, graph_name(number, generation))
        started = time.monotonic()
        # an invalid one is what a build killed part-way leaves
        connection.execute(sql.SQL("DROP INDEX CONCURRENTLY IF EXISTS {}").format(name))
        connection.execute(statement)
        connection.execute(sql.SQL("ANALYZE {}").format(part))  # the planner's row estimates
        log.info(
            "built the HNSW graph of %s in %.1f s",
            part.as_string(connection),
            time.monotonic() - started,
        )
