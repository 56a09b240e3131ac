"""Webhooks under load: every event delivered, none lost, duplicates counted, and ingestion
throughput with webhooks beside without, in one run; then again across a kill -9 of `serve`
mid-delivery.

Run: .venv/bin/python bench/bench_webhooks.py [--jobs 1000] [--blocks 4] [--kill-jobs 1000]

One real `docingest serve` (production settings, isolated extraction, the embedded store),
embedding through the fake OpenAI-compatible server (tests/support/embedding_server.py, in
this process), small text documents (about 6 chunks each). The receiver
(tests/support/webhook_receiver.py, in a process of its own so that it does not share this
process's interpreter with the fake embedder, on 127.0.0.1, so
`DOCINGEST_WEBHOOK_ALLOW_PRIVATE=true`) refuses a third of first attempts (500, chosen by a
hash of the delivery id) and accepts everything else.

Throughput: `--jobs` uploads without a webhook and `--jobs` with one (subscribed to
job.completed), in `--blocks` alternating blocks (ABBA...) so that the machine's drift (it is
shared) falls on both alike; a block's seconds are from its first job's creation to its last
job's end (the jobs' own times). Delivery: after the last block, wait until every completed
job of the webhook blocks has its delivery accepted; report lost (no delivery), duplicates
(a delivery id accepted more than once, or two deliveries of one job) and the retries.

Crash: `--kill-jobs` more uploads with the webhook; once a third of their deliveries are
accepted, `serve` is killed with SIGKILL and started again on the same Redis and data; wait
until every job has ended and every completed job's event is accepted.

Every document is numbered with seven digits, so both modes ingest documents of one size
(`notes` grows with its number's width). The first WARM_UP_JOBS jobs are not counted. Backoff
is shortened (first retry after 1 s, at most 5 s between attempts) so the retried third
converges within the run; the default (10 s doubling to an hour) changes when retries land,
not how many deliveries there are.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import httpx

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from _common import machine  # noqa: E402
from _service_tools import Outcome, code_version, settle, upload  # noqa: E402

from tests.support.crash import notes  # noqa: E402
from tests.support.docingest_service import Process, ServiceEnv, start, wait_until_up  # noqa: E402
from tests.support.embedding_server import FakeEmbeddingServer  # noqa: E402
from tests.support.load import production_env  # noqa: E402
from tests.support.redis_db import purge_keys  # noqa: E402
from tests.support.webhook_receiver import Received, read_log  # noqa: E402


class ReceiverProcess:
    """The flaky receiver in a subprocess; what it got is read from its log file."""

    def __init__(self, log: Path) -> None:
        self.log = log
        self.popen = subprocess.Popen(
            [sys.executable, "-m", "tests.support.webhook_receiver", "flaky", str(log)],
            cwd=REPO,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self.popen.stdout is not None
        self.port = int(self.popen.stdout.readline())
        self.url = f"http://127.0.0.1:{self.port}/hook"

    @property
    def received(self) -> list[Received]:
        return read_log(self.log)

    def accepted(self) -> list[Received]:
        return [r for r in self.received if r.status == 200]

    def stop(self) -> None:
        self.popen.kill()
        self.popen.wait()


WEBHOOK_ENV = {
    "DOCINGEST_WEBHOOK_ALLOW_PRIVATE": "true",
    "DOCINGEST_WEBHOOK_BACKOFF_BASE_SECONDS": "1",
    "DOCINGEST_WEBHOOK_BACKOFF_MAX_SECONDS": "5",
    # The jobs a kill -9 interrupts are recovered by the sweep; these bring that from minutes
    # to seconds (RELIABILITY.md, "Crash safety"), for both modes alike.
    "DOCINGEST_HEARTBEAT_TIMEOUT_SECONDS": "15",
    "DOCINGEST_HOUSEKEEPING_INTERVAL_SECONDS": "5",
    "DOCINGEST_LOST_MESSAGE_AFTER_SECONDS": "20",
}
WARM_UP_JOBS = 20
"""Uploaded first and not counted: the first jobs start the fork servers and open the store."""
UPLOADERS = 8


CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(root: int) -> float:
    """CPU seconds (user + system) used so far by process `root` and its descendants
    (`serve`'s extraction children, the ended ones through their parent's count), from /proc."""
    stats: dict[int, tuple[int, float]] = {}  # pid -> (parent, seconds)
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:  # gone meanwhile
            continue
        ticks = sum(int(value) for value in fields[11:15])  # its own, and its reaped children's
        stats[int(entry.name)] = (int(fields[1]), ticks / CLOCK_TICKS)
    tree, total = {root}, 0.0
    for pid in sorted(stats):  # children have higher pids here, short-lived ones included
        if pid == root or stats[pid][0] in tree:
            tree.add(pid)
            total += stats[pid][1]
    return total


@dataclass
class Cpu:
    """The CPU seconds a mode's blocks cost `serve` (with its children) and the receiver."""

    serve: float = 0.0
    receiver: float = 0.0


@dataclass
class Mode:
    label: str
    jobs: int = 0
    seconds: float = 0.0
    cpu: Cpu = field(default_factory=Cpu)
    failures: list[str] = field(default_factory=list)
    job_ids: list[str] = field(default_factory=list)

    @property
    def rate(self) -> float:
        return self.jobs / self.seconds if self.seconds else 0.0


def upload_many(client: httpx.Client, index: str, first: int, count: int) -> list[str]:
    """Upload `count` small documents at once (UPLOADERS in flight); their job ids."""

    def one(number: int) -> str:
        _, response = upload(client, index, notes(number), filename=f"n{number}.txt",
                             document_id=f"doc-{number}")  # fmt: skip
        return str(response.raise_for_status().json()["job_id"])

    with ThreadPoolExecutor(UPLOADERS) as pool:
        return list(pool.map(one, range(first, first + count)))


def run_block(
    client: httpx.Client, mode: Mode, index: str, first: int, count: int, pids: tuple[int, int]
) -> None:
    """Run one block of `count` jobs; `pids`: serve's and the receiver's, whose CPU it counts."""
    serve_pid, receiver_pid = pids
    before = cpu_seconds(serve_pid), cpu_seconds(receiver_pid)
    job_ids = upload_many(client, index, first, count)
    outcome = settle(client, job_ids, index=index, timeout=3600)
    mode.cpu.serve += cpu_seconds(serve_pid) - before[0]
    mode.cpu.receiver += cpu_seconds(receiver_pid) - before[1]
    if outcome.statuses.get("completed", 0) != count or outcome.bad:
        mode.failures.append(outcome.line())
    mode.jobs += count
    mode.seconds += outcome.span()
    mode.job_ids += job_ids


def delivered_jobs(receiver: ReceiverProcess) -> dict[str, list[Received]]:
    """Job id → the accepted deliveries of its event."""
    found: dict[str, list[Received]] = {}
    for received in receiver.accepted():
        found.setdefault(received.payload["data"]["job_id"], []).append(received)
    return found


def wait_deliveries(receiver: ReceiverProcess, job_ids: list[str], timeout: float) -> float:
    """Wait until each job has an accepted delivery; the seconds it took after the call."""
    started = time.monotonic()
    wanted = set(job_ids)
    while time.monotonic() - started < timeout:
        if wanted <= set(delivered_jobs(receiver)):
            break
        time.sleep(0.5)
    return time.monotonic() - started


def tally(receiver: ReceiverProcess, job_ids: list[str]) -> dict[str, int]:
    by_job = delivered_jobs(receiver)
    ids = [r.delivery_id for r in receiver.accepted()]
    ours = set(job_ids)
    return {
        "events": len(job_ids),
        "delivered": len(ours & set(by_job)),
        "lost": len(ours - set(by_job)),
        "duplicates": len(ids)
        - len(set(ids))
        + sum(len({r.delivery_id for r in by_job[j]}) - 1 for j in ours & set(by_job)),
        "refused_attempts": sum(1 for r in receiver.received if r.status != 200),
        "attempts": len(receiver.received),
    }


def load() -> str:
    return "/".join(f"{value:.1f}" for value in os.getloadavg())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=1000, help="jobs per mode")
    parser.add_argument("--blocks", type=int, default=4, help="alternating blocks per mode")
    parser.add_argument("--kill-jobs", type=int, default=1000, help="0 skips the crash run")
    parser.add_argument("--latency-ms", type=float, default=5.0)
    args = parser.parse_args()
    print(f"# bench_webhooks: {code_version()}; {machine()}", flush=True)
    loads = [load()]
    plain, hooked = Mode("no webhook"), Mode("webhook (a third of first attempts refused)")
    with (
        tempfile.TemporaryDirectory(prefix="docingest-bench-webhooks-") as tmp,
        FakeEmbeddingServer(latency=args.latency_ms / 1000) as fake,
    ):
        receiver = ReceiverProcess(Path(tmp) / "received.jsonl")
        env = production_env(Path(tmp) / "data", fake)
        env.extra |= WEBHOOK_ENV
        serve = start(["serve"], env, name="serve")
        try:
            wait_until_up(serve, env.base_url)
            client = httpx.Client(base_url=env.base_url, timeout=120)
            hook = {"url": receiver.url, "events": ["job.completed"], "secret": "s" * 32}
            for index in ("hooked", "crash"):
                client.put(f"/v1/indexes/{index}/webhooks/bench", json=hook).raise_for_status()
            pids = (serve.popen.pid, receiver.popen.pid)
            run_block(client, Mode("warm-up"), "warmup", 5 * 10**6, WARM_UP_JOBS, pids)
            size = args.jobs // args.blocks
            order = [plain, hooked, hooked, plain] * ((args.blocks + 1) // 2)
            done = {id(plain): 0, id(hooked): 0}
            for mode in order:
                if done[id(mode)] >= args.blocks:
                    continue
                index = "hooked" if mode is hooked else "plain"
                # Numbers of one width in both modes: notes(n) grows with n's digits.
                first = done[id(mode)] * size + (10**6 if mode is hooked else 3 * 10**6)
                run_block(client, mode, index, first, size, pids)
                done[id(mode)] += 1
                print(f"  {mode.label}: block {done[id(mode)]}, {mode.rate:.1f} jobs/s so far, "
                      f"load {load()}", flush=True)  # fmt: skip
            loads.append(load())
            drain = wait_deliveries(receiver, hooked.job_ids, timeout=1800)
            result = tally(receiver, hooked.job_ids)
            print("\n| mode | jobs | seconds | jobs/s | ratio | serve CPU ms/job "
                  "| receiver CPU ms/job |\n|---|---:|---:|---:|---:|---:|---:|")  # fmt: skip
            for mode in (plain, hooked):
                print(f"| {mode.label} | {mode.jobs} | {mode.seconds:.1f} | {mode.rate:.2f} | "
                      f"{mode.rate / plain.rate:.3f} | {1000 * mode.cpu.serve / mode.jobs:.1f} | "
                      f"{1000 * mode.cpu.receiver / mode.jobs:.1f} |")  # fmt: skip
            print(f"\ndeliveries: {result}; the last delivered {drain:.1f} s after the last job "
                  f"ended; failures: {plain.failures + hooked.failures or 'none'}")  # fmt: skip
            if args.kill_jobs:
                serve = crash_run(client, env, serve, receiver, args.kill_jobs)
            loads.append(load())
            client.close()
        finally:
            serve.stop()
            receiver.stop()
            purge_keys(env.key_prefix)
    print(f"\nload average (1/5/15 min) at start, after the throughput blocks, at the end: "
          f"{' → '.join(loads)}")  # fmt: skip
    return 0


def crash_run(
    client: httpx.Client, env: ServiceEnv, serve: Process, receiver: ReceiverProcess, count: int
) -> Process:
    """Upload `count` with the webhook, kill -9 serve a third of the way through the
    deliveries, start it again, and count what arrives."""
    before = {r.delivery_id for r in receiver.accepted()}
    job_ids = upload_many(client, "crash", 2 * 10**6, count)

    def ours() -> int:
        return len({r.delivery_id for r in receiver.accepted()} - before)

    while ours() < count // 3:
        time.sleep(0.2)
    in_flight = sum(1 for r in receiver.received if r.status is None)
    assert serve.stop(signal.SIGKILL) == -signal.SIGKILL
    killed_at = ours()
    serve = start(["serve"], env, name="serve-again")
    wait_until_up(serve, env.base_url)
    outcome: Outcome = settle(client, job_ids, index="crash", timeout=3600)
    completed = [j for j in job_ids if outcome.jobs.get(j, {}).get("status") == "completed"]
    drain = wait_deliveries(receiver, completed, timeout=1800)
    by_job = delivered_jobs(receiver)
    result = {
        "jobs": count,
        "jobs_completed": len(completed),
        "outcome": outcome.line(),
        "delivered_before_kill": killed_at,
        "delivered": len(set(completed) & set(by_job)),
        "lost": len(set(completed) - set(by_job)),
        "duplicates": sum(len(by_job[j]) - 1 for j in completed if j in by_job),
        "requests_in_flight_at_kill": in_flight,
    }
    print(f"\ncrash run (kill -9 of serve mid-delivery, then a restart): {result}; "
          f"everything delivered {drain:.1f} s after the last job ended")  # fmt: skip
    return serve


if __name__ == "__main__":
    sys.exit(main())
