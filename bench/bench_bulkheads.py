"""Bulkheads: searches without rerank, `/healthz` and a healthy webhook receiver beside a
re-ranker and a webhook receiver that hang.

Run: .venv/bin/python bench/bench_bulkheads.py [--searches 100] [--rounds 3] [--events 30]
     [--code PATH]   (PATH: another checkout to run the service from, e.g. the parent commit)

One real `docingest serve` (production settings, the embedded store, the fake embedder), all
on loopback. The re-ranker (`DOCINGEST_RERANK_URL`) and one webhook receiver are TCP servers
that accept and never answer (tests/support/hanging_server.py); a second receiver, in this
process, answers 200 at once and notes when each delivery arrived. Settings are the defaults
(rerank timeout 5 s and deadline 8 s, one attempt; webhook timeout 10 s, 8 senders) but for
`DOCINGEST_WEBHOOK_ALLOW_PRIVATE` (loopback receivers).

1. Idle: `--rounds` rounds of `--searches` concurrent hybrid searches with rerank off; their
   latencies, and one `/healthz` asked during each round.
2. Hostile: both receivers subscribe to `job.completed`; `--events` documents are uploaded;
   the same rounds run, every other search with rerank on (it waits on the hung re-ranker,
   or is refused `rerank_busy`), so the machine carries as many searches as when idle. A
   healthy delivery's lag is its arrival minus its event's `created_at`; every one is waited
   for, `--wait` seconds at most.

Reports p50/p99 of the searches without rerank (idle, hostile, and the ratio), `/healthz`,
and the healthy receiver's delivery lag. BENCHMARKS.md, "Bulkheads".
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from _common import machine  # noqa: E402
from _service_tools import code_version, percentile, settle, upload  # noqa: E402

from tests.support.crash import notes  # noqa: E402
from tests.support.hanging_server import HangingServer  # noqa: E402
from tests.support.load import serving  # noqa: E402

INDEX = "bulkheads"
CONTENT_DOCUMENTS = 8
QUERY = "Note 3.2 n3p2w7"


class TimedReceiver:
    """A webhook receiver answering 200 at once; writes `id created_at arrival` per delivery
    to `log`. Run in a process of its own (`--receiver LOG`), so the bench's client threads
    do not slow its answers."""

    def __init__(self, log: Path) -> None:
        lock = threading.Lock()

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            disable_nagle_algorithm = True

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("content-length") or 0))
                arrived = time.time()
                payload = json.loads(body)
                created = datetime.fromisoformat(payload["created_at"]).timestamp()
                with lock, log.open("a") as out:
                    out.write(f"{payload['id']} {created} {arrived}\n")
                self.send_response(200)
                self.send_header("Content-Length", "2")
                self.end_headers()
                self.wfile.write(b"ok")

            def log_message(self, *_: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}/hook"

    def serve(self) -> None:
        self._server.serve_forever()


class ReceiverProcess:
    """`TimedReceiver` in a subprocess; the lags read from its log."""

    def __init__(self, log: Path) -> None:
        self.log = log
        self.popen = subprocess.Popen(
            [sys.executable, __file__, "--receiver", str(log)], stdout=subprocess.PIPE, text=True
        )
        assert self.popen.stdout is not None
        self.url = self.popen.stdout.readline().strip()

    def lags(self) -> list[float]:
        """Seconds from each event to its first arrival."""
        first: dict[str, float] = {}
        if self.log.exists():
            for row in self.log.read_text().splitlines():
                delivery, created, arrived = row.split()
                first.setdefault(delivery, float(arrived) - float(created))
        return list(first.values())

    def close(self) -> None:
        self.popen.kill()
        self.popen.wait()


def search_round(base_url: str, count: int, *, hostile: bool) -> tuple[list[float], list[float]]:
    """`count` concurrent searches, every other one with rerank on when `hostile`; the
    seconds of those with rerank off, and of those with it on."""

    def one(number: int) -> tuple[bool, float]:
        rerank = hostile and number % 2 == 1
        body = {"query": QUERY, "top_k": 5, "rerank": rerank}
        started = time.monotonic()
        with httpx.Client(base_url=base_url, timeout=120) as client:
            client.post(f"/v1/indexes/{INDEX}/search", json=body).raise_for_status()
        return rerank, time.monotonic() - started

    with ThreadPoolExecutor(count) as pool:
        timed = list(pool.map(one, range(count)))
    return [s for on, s in timed if not on], [s for on, s in timed if on]


def healthz(base_url: str, *, after: float = 0.0) -> float:
    """Seconds `/healthz` takes, asked `after` seconds from now (once a round is under way)."""
    time.sleep(after)
    started = time.monotonic()
    httpx.get(f"{base_url}/healthz", timeout=120).raise_for_status()
    return time.monotonic() - started


def measure(base_url: str, args: argparse.Namespace, *, hostile: bool) -> dict[str, list[float]]:
    """`--rounds` rounds of searches, with `/healthz` asked during each."""
    found: dict[str, list[float]] = {"off": [], "on": [], "healthz": []}
    for _ in range(args.rounds):
        with ThreadPoolExecutor(1) as prober:
            probe = prober.submit(healthz, base_url, after=0.2)
            off, on = search_round(base_url, args.searches, hostile=hostile)
            found["healthz"].append(probe.result())
        found["off"] += off
        found["on"] += on
    return found


def upload_many(client: httpx.Client, stem: str, count: int) -> None:
    for number in range(count):
        _, response = upload(client, INDEX, notes(1000 + number), filename="n.txt",
                             document_id=f"{stem}-{number}.txt")  # fmt: skip
        response.raise_for_status()


def line(label: str, values: list[float]) -> str:
    return (
        f"{label}: p50 {1000 * percentile(values, 0.5):.0f} ms, "
        f"p99 {1000 * percentile(values, 0.99):.0f} ms, max {1000 * max(values):.0f} ms "
        f"({len(values)})"
    )


def run(args: argparse.Namespace) -> None:
    hung_receiver, hung_reranker = HangingServer(), HangingServer()
    scratch = Path(tempfile.mkdtemp(prefix="bench-bulkheads-"))
    healthy = ReceiverProcess(scratch / "arrivals.log")
    settings = {
        "DOCINGEST_WEBHOOK_ALLOW_PRIVATE": "true",
        "DOCINGEST_RERANK_PROVIDER": "cohere",
        "DOCINGEST_RERANK_URL": hung_reranker.url,
        "DOCINGEST_RERANK_MAX_ATTEMPTS": "1",
    }
    with (
        tempfile.TemporaryDirectory() as data,
        serving(Path(data), code=args.code, settings=settings) as env,
    ):
        base_url = env.base_url
        with httpx.Client(base_url=base_url, timeout=120) as client:
            jobs = []
            for number in range(CONTENT_DOCUMENTS):
                _, response = upload(client, INDEX, notes(number), filename="n.txt",
                                     document_id=f"content-{number}.txt")  # fmt: skip
                jobs.append(response.raise_for_status().json()["job_id"])
            settle(client, jobs, index=INDEX, timeout=args.wait)
            search_round(base_url, 10, hostile=False)  # warm up: query cache, connections
            # As many uploads as the hostile phase, so both carry the same ingest work.
            upload_many(client, "quiet", args.events)
            idle = measure(base_url, args, hostile=False)

            for name, url in (("hung", hung_receiver.url + "/hook"), ("healthy", healthy.url)):
                hook = {"url": url, "events": ["job.completed"]}
                client.put(f"/v1/indexes/{INDEX}/webhooks/{name}", json=hook).raise_for_status()
            upload_many(client, "event", args.events)
            hostile = measure(base_url, args, hostile=True)
            deadline = time.monotonic() + args.wait
            while len(healthy.lags()) < args.events and time.monotonic() < deadline:
                time.sleep(0.2)
    hung_reranker.close()
    hung_receiver.close()
    healthy.close()
    lags = healthy.lags()
    print(f"# bench_bulkheads: {machine()}; {code_version() if args.code is None else args.code}")
    print(f"{args.searches} concurrent searches x {args.rounds} rounds; {args.events} events")
    print(line("idle, rerank off", idle["off"]))
    print(line("hostile, rerank off", hostile["off"]))
    ratio = percentile(hostile["off"], 0.99) / percentile(idle["off"], 0.99)
    print(f"p99 ratio hostile/idle, rerank off: {ratio:.2f}")
    print(line("hostile, rerank on (hung)", hostile["on"]))
    print(line("idle /healthz", idle["healthz"]))
    print(line("hostile /healthz", hostile["healthz"]))
    print(f"healthy receiver: {len(lags)} of {args.events} deliveries")
    if lags:
        print(line("healthy delivery lag", lags))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--searches", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--events", type=int, default=30)
    parser.add_argument("--wait", type=float, default=120.0, help="most seconds for any wait")
    parser.add_argument("--code", type=Path, default=None)
    parser.add_argument("--receiver", type=Path, help=argparse.SUPPRESS)  # the subprocess
    args = parser.parse_args()
    if args.receiver is not None:
        receiver = TimedReceiver(args.receiver)
        print(receiver.url, flush=True)
        receiver.serve()
        return
    run(args)


if __name__ == "__main__":
    main()
