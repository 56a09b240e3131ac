"""`SourceStore`: an index's sources, their runs, the fingerprints of what each brought, a
run's checkpoint, the due set and the leases, all in Redis (keys: `docingest.pipeline.keys`).

A run under way is the hash `current` (its counts grow there with HINCRBY, so they survive
the process that runs it); its checkpoint is the set `seen` of the items it has compared and
the hash `jobs` of the jobs it submitted. A finished run moves to `runs`, with its webhook
event, in one script (`docingest.pipeline.sources.scripts`).
"""

from __future__ import annotations

import json
import threading
import time
import uuid
import weakref
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from docingest.pipeline.errors import RunNotFound, RunStateConflict
from docingest.pipeline.keys import Keys
from docingest.pipeline.outbox.store import outbox_arg, rfc3339
from docingest.pipeline.redis_errors import map_redis_errors
from docingest.pipeline.services import Services
from docingest.pipeline.sources.scripts import (
    CANCEL_RUN,
    FINISH_RUN,
    RELEASE_LEASE,
    RENEW_LEASE,
    REQUEST_RUN,
    TAKE_LEASE,
)
from docingest.pipeline.sources.spec import COUNT_FIELDS, Run, RunCounts, RunError, StoredSource

if TYPE_CHECKING:
    from redis import Redis


def due_member(index: str, name: str) -> str:
    return json.dumps([index, name], separators=(",", ":"))


@dataclass(frozen=True, slots=True)
class SourceKeys:
    current: str
    runs: str
    order: str
    items: str
    seen: str
    jobs: str
    lease: str


class SourceStore:
    """One per process; `redis` must decode responses."""

    def __init__(self, redis: Redis, *, keys: Keys, runs_kept: int, webhook_log_size: int) -> None:
        self._redis: Any = (
            redis  # decodes responses: every answer is str (redis-py types bytes | str)
        )
        self.keys = keys
        self._runs_kept = runs_kept
        self._log_size = webhook_log_size
        self._request = redis.register_script(REQUEST_RUN)
        self._take = redis.register_script(TAKE_LEASE)
        self._renew = redis.register_script(RENEW_LEASE)
        self._release = redis.register_script(RELEASE_LEASE)
        self._finish = redis.register_script(FINISH_RUN)
        self._cancel = redis.register_script(CANCEL_RUN)

    def of(self, index: str, name: str) -> SourceKeys:
        key = self.keys.source_key
        return SourceKeys(
            current=key("current", index, name),
            runs=key("runs", index, name),
            order=key("runorder", index, name),
            items=key("items", index, name),
            seen=key("seen", index, name),
            jobs=key("jobs", index, name),
            lease=key("lease", index, name),
        )

    # --- sources ------------------------------------------------------------------------

    def put(self, source: StoredSource) -> tuple[StoredSource, bool]:
        """Store `source`; (what is stored, whether it is new). An existing one keeps its
        `created_at`; a schedule puts it in the due set (at once when new)."""
        with map_redis_errors():
            raw = self._redis.hget(self.keys.sources(source.index), source.name)
            existing = StoredSource.model_validate_json(raw) if raw else None
            if existing is not None:
                source = source.model_copy(update={"created_at": existing.created_at})
                if existing.same_as(source):
                    return existing, False
            self._redis.hset(self.keys.sources(source.index), source.name, source.model_dump_json())
            member = due_member(source.index, source.name)
            if source.schedule is None:
                if not self._redis.exists(self.of(source.index, source.name).current):
                    self._redis.zrem(self.keys.sources_due, member)
            elif existing is None or existing.schedule != source.schedule:
                self._redis.zadd(self.keys.sources_due, {member: time.time()})
        return source, existing is None

    def get(self, index: str, name: str) -> StoredSource | None:
        with map_redis_errors():
            raw = self._redis.hget(self.keys.sources(index), name)
        return StoredSource.model_validate_json(raw) if raw else None

    def sources(self, index: str) -> list[StoredSource]:
        with map_redis_errors():
            raw = self._redis.hgetall(self.keys.sources(index))
        return [StoredSource.model_validate_json(raw[name]) for name in sorted(raw)]

    def delete(self, index: str, name: str) -> bool:
        """Forget the source, its runs and its fingerprints; False if there was none."""
        keys = self.of(index, name)
        with map_redis_errors():
            pipe = self._redis.pipeline(transaction=True)
            pipe.hdel(self.keys.sources(index), name)
            pipe.zrem(self.keys.sources_due, due_member(index, name))
            pipe.delete(keys.current, keys.runs, keys.order, keys.items, keys.seen, keys.jobs)
            removed = pipe.execute()[0]
        return bool(removed)

    def forget_fingerprints(self, index: str) -> None:
        """Forget what every source of `index` brought, so that each one's next run brings it
        all again: called when the index itself is deleted, whose documents those
        fingerprints described (kept, a run would find nothing changed and bring nothing)."""
        with map_redis_errors():
            names = self._redis.hkeys(self.keys.sources(index))
            if names:
                self._redis.delete(*[self.of(index, name).items for name in names])

    def item_ids(self, index: str, name: str) -> list[str]:
        with map_redis_errors():
            return list(self._redis.hkeys(self.of(index, name).items))

    # --- runs ---------------------------------------------------------------------------

    def request_run(self, index: str, name: str, *, trigger: str) -> tuple[bool, Run]:
        """Queue a run now; (True, it), or (False, the run already under way)."""
        keys = self.of(index, name)
        run_id = "run_" + uuid.uuid4().hex
        with map_redis_errors():
            answer = self._request(
                keys=[keys.current, self.keys.sources_due],
                args=[run_id, due_member(index, name), trigger],
            )
        if int(answer[0]) == 1:
            return True, Run(run_id=run_id, status="queued", trigger=trigger)  # type: ignore[arg-type]
        return False, _run_from_reply(answer[1])

    def cancel_run(self, index: str, name: str, run_id: str) -> Run:
        """Ask the run under way to stop (it shows `cancelling` until its process stops it;
        asking again changes nothing); `RunStateConflict` once it ended, else `RunNotFound`."""
        keys = self.of(index, name)
        with map_redis_errors():
            answer = self._cancel(keys=[keys.current, keys.runs], args=[run_id])
        if answer[0] == "requested":
            return _run_from_reply(answer[1])
        if answer[0] == "ended":
            ended = Run.model_validate_json(answer[1])
            raise RunStateConflict(f"Run '{run_id}' has ended {ended.status}; nothing to cancel.")
        raise RunNotFound(f"Source '{name}' has no run '{run_id}'.")

    def cancel_requested(self, index: str, name: str) -> bool:
        with map_redis_errors():
            return bool(self._redis.hget(self.of(index, name).current, "cancel") == "1")

    def current(self, index: str, name: str) -> Run | None:
        with map_redis_errors():
            raw = self._redis.hgetall(self.of(index, name).current)
        return run_from_hash(raw) if raw else None

    def runs(self, index: str, name: str, limit: int) -> list[Run]:
        keys = self.of(index, name)
        with map_redis_errors():
            ids = self._redis.zrevrange(keys.order, 0, max(limit - 1, 0))
            rows = self._redis.hmget(keys.runs, ids) if ids else []
            current = self._redis.hgetall(keys.current)
        runs = [run_from_hash(current)] if current else []
        runs += [Run.model_validate_json(row) for row in rows if row]
        return runs[:limit]

    def next_due(self, index: str, name: str) -> float | None:
        with map_redis_errors():
            score = self._redis.zscore(self.keys.sources_due, due_member(index, name))
        return float(score) if score is not None else None

    def forget_due(self, index: str, name: str) -> None:
        with map_redis_errors():
            self._redis.zrem(self.keys.sources_due, due_member(index, name))

    def due(self, most: int) -> list[tuple[str, str]]:
        """Sources due now (a scheduled time passed, or a run requested), oldest first."""
        with map_redis_errors():
            members = self._redis.zrangebyscore(
                self.keys.sources_due, "-inf", time.time(), start=0, num=most
            )
        return [tuple(json.loads(member)) for member in members]

    # --- a run under way ----------------------------------------------------------------

    def take_lease(self, index: str, name: str, token: str, seconds: float) -> bool:
        keys = self.of(index, name)
        with map_redis_errors():
            return bool(
                self._take(
                    keys=[keys.lease, self.keys.sources_due],
                    args=[token, int(seconds * 1000), due_member(index, name)],
                )
            )

    def renew_lease(self, index: str, name: str, token: str, seconds: float) -> bool:
        with map_redis_errors():
            return bool(
                self._renew(keys=[self.of(index, name).lease], args=[token, int(seconds * 1000)])
            )

    def release_lease(self, index: str, name: str, token: str) -> None:
        with map_redis_errors():
            self._release(keys=[self.of(index, name).lease], args=[token])

    def start(self, index: str, name: str, *, trigger: str) -> Run:
        """The run to carry on: the one under way (queued, or left by a process that died),
        else a new scheduled one; marked running."""
        keys = self.of(index, name)
        now = time.time()
        with map_redis_errors():
            if not self._redis.exists(keys.current):
                self._redis.hset(
                    keys.current,
                    mapping={
                        "run_id": "run_" + uuid.uuid4().hex,
                        "trigger": trigger,
                        "created_at": str(now),
                    },
                )
            self._redis.hsetnx(keys.current, "started_at", str(now))
            self._redis.hset(keys.current, "status", "running")
            return run_from_hash(self._redis.hgetall(keys.current))

    def known(self, index: str, name: str) -> dict[str, dict[str, Any]]:
        with map_redis_errors():
            raw = self._redis.hgetall(self.of(index, name).items)
        return {item: json.loads(record) for item, record in raw.items()}

    def seen(self, index: str, name: str) -> set[str]:
        with map_redis_errors():
            return set(self._redis.smembers(self.of(index, name).seen))

    def mark(
        self,
        index: str,
        name: str,
        item_id: str,
        counts: Iterable[str],
        *,
        record: Mapping[str, Any] | None = None,
        job: tuple[str, str] | None = None,
    ) -> None:
        """Record one item compared, in one step: in the checkpoint, its counts, its new
        fingerprint, the job it was sent as (`(job id, new|changed)`)."""
        keys = self.of(index, name)
        with map_redis_errors():
            pipe = self._redis.pipeline(transaction=True)
            pipe.sadd(keys.seen, item_id)
            for count in counts:
                pipe.hincrby(keys.current, count, 1)
            if record is not None:
                pipe.hset(keys.items, item_id, json.dumps(record, separators=(",", ":")))
            if job is not None:
                pipe.hset(keys.jobs, job[0], json.dumps([item_id, job[1]]))
            pipe.execute()

    def mark_unchanged(
        self, index: str, name: str, items: Sequence[tuple[str, Mapping[str, Any] | None]]
    ) -> None:
        """Record many unchanged items in one step (their fingerprints when given)."""
        if not items:
            return
        keys = self.of(index, name)
        records = {
            item_id: json.dumps(record, separators=(",", ":"))
            for item_id, record in items
            if record is not None
        }
        with map_redis_errors():
            pipe = self._redis.pipeline(transaction=True)
            pipe.sadd(keys.seen, *[item_id for item_id, _ in items])
            pipe.hincrby(keys.current, "listed", len(items))
            pipe.hincrby(keys.current, "unchanged", len(items))
            if records:
                pipe.hset(keys.items, mapping=records)
            pipe.execute()

    def forget_item(self, index: str, name: str, item_id: str, moves: Mapping[str, int]) -> None:
        """Drop an item's fingerprint (deleted, or its job failed: tried again next run) and
        move its counts (`{"new": -1, "failed": 1}`), in one step."""
        keys = self.of(index, name)
        with map_redis_errors():
            pipe = self._redis.pipeline(transaction=True)
            pipe.hdel(keys.items, item_id)
            for count, by in moves.items():
                pipe.hincrby(keys.current, count, by)
            pipe.execute()

    def count(self, index: str, name: str, field: str, by: int) -> None:
        with map_redis_errors():
            self._redis.hincrby(self.of(index, name).current, field, by)

    def run_jobs(self, index: str, name: str) -> dict[str, tuple[str, str]]:
        with map_redis_errors():
            raw = self._redis.hgetall(self.of(index, name).jobs)
        return {job_id: tuple(json.loads(value)) for job_id, value in raw.items()}

    def drop_job(self, index: str, name: str, job_id: str) -> None:
        with map_redis_errors():
            self._redis.hdel(self.of(index, name).jobs, job_id)

    def finish(
        self,
        source: StoredSource,
        run: Run,
        *,
        token: str,
        next_due: float | None,
        event: str,
    ) -> bool:
        """Move `run` (ended) to the runs, reschedule, and write its event; False when the
        run is no longer this process's to finish (its lease lapsed and another took it)."""
        keys = self.of(source.index, source.name)
        run_json = run.model_dump_json()
        data = json.dumps({**json.loads(run_json), "source": source.name}, separators=(",", ":"))
        started = time.time()
        with map_redis_errors():
            done = self._finish(
                keys=[
                    keys.current,
                    keys.runs,
                    keys.order,
                    keys.seen,
                    keys.jobs,
                    self.keys.sources_due,
                    keys.lease,
                ],
                args=[
                    run.run_id,
                    run_json,
                    started,
                    self._runs_kept,
                    "" if next_due is None else next_due,
                    due_member(source.index, source.name),
                    token,
                    event,
                    source.index,
                    source.name,
                    data,
                    outbox_arg(self.keys, log_size=self._log_size),
                ],
            )
        return bool(done)


def run_from_hash(raw: Mapping[str, str]) -> Run:
    """A run under way, from its `current` hash: `cancelling` once its cancel was asked."""
    error = json.loads(raw["error"]) if raw.get("error") else None
    status = "cancelling" if raw.get("cancel") == "1" else raw.get("status", "queued")
    return Run(
        run_id=raw["run_id"],
        status=status,  # type: ignore[arg-type]
        trigger=raw.get("trigger", "manual"),  # type: ignore[arg-type]
        created_at=rfc3339(raw.get("created_at")),
        started_at=rfc3339(raw.get("started_at")),
        finished_at=rfc3339(raw.get("finished_at")),
        counts=RunCounts(**{field: int(raw.get(field, 0)) for field in COUNT_FIELDS}),
        error=RunError(**error) if error else None,
    )


def _run_from_reply(flat: Sequence[str]) -> Run:
    """A run under way from a script's `HGETALL` of its `current` hash (field, value, …)."""
    return run_from_hash(dict(zip(flat[::2], flat[1::2], strict=True)))


_STORES: weakref.WeakKeyDictionary[Services, SourceStore] = weakref.WeakKeyDictionary()
_STORES_LOCK = threading.Lock()


def source_store(services: Services) -> SourceStore:
    """The process's `SourceStore` over `services`' Redis (built on first use)."""
    with _STORES_LOCK:
        store = _STORES.get(services)
        if store is None:
            settings = services.settings
            store = SourceStore(
                services.redis,
                keys=services.keys,
                runs_kept=settings.source_runs_kept,
                webhook_log_size=settings.webhook_log_size,
            )
            _STORES[services] = store
        return store
