"""A bounded load on loopback: many small uploads from concurrent clients while searches run.

Run: .venv/bin/python bench/bench_load.py [--uploads 500] [--clients 20] [--searchers 2] [--quick]
     [--baseline DIR]

`--baseline DIR` first runs the same load against a serve of another checkout (e.g.
`git archive main | tar -x -C DIR`), then against this tree, and prints the jobs/s ratio.

Starts a real `docingest serve` (API and in-process worker, extraction isolated in a child
process, the embedded Qdrant Edge store) with production settings on a free port, its own data
directory and Redis key prefix on DB 15; embeddings come from the fake OpenAI-compatible server
(tests/support/embedding_server.py, text-embedding-3-small shaped: 1,536 dimensions), so the
load falls on the service, not on a model. Then:

1. `--uploads` uploads of small real documents (corpus and examples/, every format) from
   `--clients` threads with a connection each, as fast as they are answered; a tenth of them
   re-upload an earlier document id with other content (replace-on-reingest), each sent after
   its original. Each upload is timed until its 202.
2. All the while, from before the first upload until every job has ended, `--searchers`
   threads POST hybrid searches to the same index back to back.
3. Every job is followed until it ends (or `--timeout`), then checked: none lost, none stuck,
   none completed twice, failures only `superseded` (a newer upload of the same document ran
   first), each document at the newest published version with its upload's bytes; after the
   service stops, the store holds exactly the live version's points of each document and no
   other (tests/support/load_checks.py lists every check).

The logic lives in tests/support/load.py and load_checks.py, which the short CI
variant (tests/reliability/test_load.py) runs too. Exit status 1 on any violation.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path

import httpx

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from _common import find_corpus, machine  # noqa: E402

from docingest.pipeline.settings import Settings  # noqa: E402
from tests.support.load import (  # noqa: E402
    LoadRun,
    Upload,
    plan_uploads,
    run_load,
    serving,
    source_files,
)
from tests.support.load_checks import Findings, check_api, check_store, percentile  # noqa: E402

INDEX = "load"


def code_version() -> str:
    """The commit under test, noting uncommitted changes to the service's code."""

    def git(*args: str) -> str:
        return subprocess.run(["git", *args], cwd=REPO, capture_output=True, text=True).stdout

    dirty = git("status", "--porcelain", "--", "docingest").strip()
    return git("rev-parse", "--short", "HEAD").strip() + (
        " (service code modified)" if dirty else ""
    )


def ms(values: list[float], *fractions: float) -> str:
    parts = [f"p{round(f * 100)} {1000 * percentile(values, f):.0f}" for f in fractions]
    return ", ".join(parts) + f", max {1000 * max(values, default=float('nan')):.0f} ms"


def report(
    args: argparse.Namespace, run: LoadRun, found: Findings, *, code: str, loads: list[str]
) -> None:
    command = f"python bench/bench_load.py --uploads {args.uploads} --clients {args.clients} "
    command += f"--searchers {args.searchers}" + (" --quick" if args.quick else "")
    command += f" --baseline {args.baseline}" if args.baseline else ""
    print(f"\nCommand: `{command}`, on {datetime.now(UTC):%Y-%m-%d}. Machine: {machine()}.")
    print(f"Code: {code}. Load average (1, 5, 15 min): {loads[0]} at start, {loads[1]} at end.")
    ids = {sent.upload.document_id for sent in run.sent}
    answered = sum(sent.status == 202 for sent in run.sent)
    to_202 = [sent.seconds for sent in run.sent if sent.status == 202]
    searches = [search.seconds for search in run.searches if search.status == 200]
    during_uploads = [
        s.seconds for s in run.searches if s.status == 200 and s.started < run.uploads_done
    ]
    failed = ", ".join(f"{code} ×{n}" for code, n in sorted(found.failed.items())) or "none"
    attempts = ", ".join(f"{a}: {n} jobs" for a, n in sorted(found.attempts.items()))
    ended = found.completed + sum(found.failed.values())
    runs = _run_seconds(run)
    print("\n| measure | value |\n|---|---|")
    print(
        f"| uploads | {len(run.sent)} ({len(ids)} document ids, {len(run.sent) - len(ids)} "
        f"re-uploads with other content) from {args.clients} clients; {answered} answered 202 |"
    )
    print(
        f"| jobs | {found.completed} completed, {sum(found.failed.values())} failed "
        f"(by code: {failed}), {len(found.lost)} lost, {len(found.not_ended)} not ended, "
        f"{len(found.duplicated)} duplicated |"
    )
    print(f"| attempts per job (attempts: jobs) | {attempts} |")
    print(
        f"| time-to-202 | {ms(to_202, 0.5, 0.95, 0.99)}; all sent in "
        f"{run.uploads_done - run.started:.1f} s |"
    )
    print(
        f"| search latency (hybrid, top 10) during the load | {len(run.searches)} searches from "
        f"{args.searchers} clients: {ms(searches, 0.5, 0.95, 0.99)}; "
        f"{len(found.search_errors)} errors |"
    )
    print(
        f"| search latency while the uploads were sent | {len(during_uploads)} searches: "
        f"{ms(during_uploads, 0.5, 0.99)} |"
    )
    print(f"| job run time (start → end) | {ms(runs, 0.5, 0.9)} |")
    print(
        f"| index afterwards | {found.documents} documents, {found.chunks} chunks; store points "
        f"= chunks: {'yes' if not found.duplicated else 'NO'} |"
    )
    print(
        f"| wall time, first upload → last job ended | {run.wall_seconds:.1f} s, "
        f"{ended / run.wall_seconds:.2f} jobs/s |"
    )


def _run_seconds(run: LoadRun) -> list[float]:
    seconds = []
    for job in run.jobs.values():
        if job and job["started_at"] and job["finished_at"]:
            started = datetime.fromisoformat(job["started_at"])
            seconds.append((datetime.fromisoformat(job["finished_at"]) - started).total_seconds())
    return seconds


def load_once(
    args: argparse.Namespace, plan: list[Upload], *, code: Path | None
) -> tuple[LoadRun, Findings]:
    """Run the load against a serve of `code` (None: this tree) and check what it left."""
    with tempfile.TemporaryDirectory(prefix="docingest-bench-load-") as tmp:
        data_dir = Path(tmp) / "data"
        with serving(data_dir, code=code) as env:
            print(f"serving {code or 'this tree'} on {env.base_url}", flush=True)
            run = run_load(
                env.base_url,
                plan,
                index=INDEX,
                clients=args.clients,
                searchers=args.searchers,
                timeout=args.timeout,
                log=lambda line: print(line, flush=True),
            )
            print(f"jobs settled after {run.wall_seconds:.0f} s; checking", flush=True)
            with httpx.Client(base_url=env.base_url, timeout=60) as client:
                max_attempts = Settings.model_fields["job_max_attempts"].default
                found = check_api(client, run, max_attempts=max_attempts)
        check_store(found, data_dir, INDEX)
    return run, found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--uploads", type=int, help="uploads (default 500, quick 100)")
    parser.add_argument("--clients", type=int, help="concurrent upload clients (20, quick 10)")
    parser.add_argument("--searchers", type=int, help="concurrent search clients (2, quick 1)")
    parser.add_argument("--quick", action="store_true", help="a smaller run")
    parser.add_argument("--timeout", type=float, default=3600, help="seconds until 'not ended'")
    parser.add_argument("--seed", type=int, default=0, help="of the re-upload plan")
    parser.add_argument("--baseline", type=Path, help="another checkout to load first")
    args = parser.parse_args()
    args.uploads = args.uploads or (100 if args.quick else 500)
    args.clients = args.clients or (10 if args.quick else 20)
    args.searchers = args.searchers if args.searchers is not None else (1 if args.quick else 2)
    plan = plan_uploads(source_files(find_corpus()), uploads=args.uploads, seed=args.seed)
    failed = False
    jobs_per_second: list[float] = []
    for code in ([args.baseline] if args.baseline else []) + [None]:
        loads = [", ".join(f"{load:.1f}" for load in os.getloadavg())]
        label = f"baseline {code}" if code else code_version()
        run, found = load_once(args, plan, code=code)
        loads.append(", ".join(f"{load:.1f}" for load in os.getloadavg()))
        report(args, run, found, code=label, loads=loads)
        ended = found.completed + sum(found.failed.values())
        jobs_per_second.append(ended / run.wall_seconds)
        if found.violations:
            failed = True
            counts = Counter(violation.split(":")[0] for violation in found.violations)
            print(f"\nFAILED: {dict(counts)}")
            for violation in found.violations[:30]:
                print(f"- {violation}")
    if len(jobs_per_second) == 2:
        print(f"\nThis tree / baseline: {jobs_per_second[1] / jobs_per_second[0]:.2f}× the jobs/s")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
