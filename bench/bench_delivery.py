"""What one webhook delivery costs the process that sends it: CPU milliseconds per attempt,
through the real dispatcher (a claim, a thread, the body, a signed POST, the outcome), to a
receiver in a process of its own.

Run: .venv/bin/python bench/bench_delivery.py [--deliveries 2000] [--tls] [--profile]

`document.deleted` events for one subscribed index are written to the outbox (Redis DB 15,
a key prefix of its own), then a `Dispatcher` is started and the process's CPU time
(`time.process_time`, every thread) is read from its start until the outbox counts every
delivery delivered. `--tls`: over HTTPS, with a certificate made for the run (trusted by
this process only). `--profile` prints where that time goes (cProfile, which slows it).
This is the share of `bench_webhooks.py`'s CPU per job that is the dispatching's own.
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from _common import machine  # noqa: E402
from _service_tools import code_version  # noqa: E402

from docingest.pipeline.outbox import Subscription  # noqa: E402
from docingest.pipeline.services import Services  # noqa: E402
from docingest.pipeline.webhooks import sender  # noqa: E402
from docingest.pipeline.webhooks.dispatcher import Dispatcher  # noqa: E402
from tests.support.redis_db import private_redis, unique_prefix  # noqa: E402
from tests.support.settings import service_settings  # noqa: E402
from tests.support.tls import self_signed_for_loopback  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--deliveries", type=int, default=2000)
    parser.add_argument("--tls", action="store_true")
    parser.add_argument("--profile", action="store_true")
    args = parser.parse_args()
    print(f"# bench_delivery: {code_version()}; {machine()}", flush=True)
    prefix = unique_prefix("bench-delivery")
    with tempfile.TemporaryDirectory(prefix="docingest-bench-delivery-") as tmp:
        command = [sys.executable, "-m", "tests.support.webhook_receiver", "ok", f"{tmp}/log.jsonl"]
        if args.tls:
            certificate = self_signed_for_loopback(Path(tmp))
            command += [str(certificate.cert), str(certificate.key)]
            sender._TLS = certificate.client_context()  # this run's certificate only
        receiver = subprocess.Popen(
            command,
            cwd=REPO,
            stdout=subprocess.PIPE,
            text=True,
        )
        try:
            assert receiver.stdout is not None
            scheme = "https" if args.tls else "http"
            url = f"{scheme}://127.0.0.1:{int(receiver.stdout.readline())}/hook"
            with private_redis(prefix):
                settings = service_settings(
                    Path(tmp) / "data", prefix, None, webhook_allow_private=True
                )
                services = Services(settings, owns_store=False)
                try:
                    run(services, url, args.deliveries, profile=args.profile)
                finally:
                    services.close()
        finally:
            receiver.kill()
            receiver.wait()
    return 0


def run(services: Services, url: str, count: int, *, profile: bool) -> None:
    outbox = services.outbox
    now = time.time()
    outbox.put(Subscription(name="bench", index="bench", url=url, events=["document.deleted"],
                            secret="s" * 32, created_at=now, updated_at=now))  # fmt: skip
    for number in range(count):
        outbox.emit_deleted("bench", f"doc-{number}", now)
    dispatcher = Dispatcher(outbox, services.settings)
    profiler = cProfile.Profile() if profile else None
    cpu, wall = time.process_time(), time.perf_counter()
    if profiler:
        profiler.enable()
    dispatcher.start()
    while outbox.stats()["delivered"] < count:
        time.sleep(0.05)
    dispatcher.stop()
    if profiler:
        profiler.disable()
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    stats = outbox.stats()
    print(f"{count} deliveries in {wall:.2f} s ({count / wall:.0f}/s): "
          f"{1000 * cpu / count:.3f} ms of CPU each; outbox {stats}")  # fmt: skip
    if profiler:
        pstats.Stats(profiler).sort_stats("tottime").print_stats(30)


if __name__ == "__main__":
    sys.exit(main())
