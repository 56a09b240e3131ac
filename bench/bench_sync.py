"""`docingest sync` of an unchanged folder: wall time and uploads made, beside `docingest ingest`
of the same folder again (the previous way: every file uploaded, each answered `unchanged`).

Both run as the real command against a real `docingest serve` (local model, embedded store, a
private Redis key prefix on the test Redis), after one sync that ingested the folder. Uploads
are counted with the service's `docingest_uploads_total` counter.

    .venv/bin/python bench/bench_sync.py [--files 1000]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from _common import machine
from _service_tools import code_version

from docingest.folder_sync import SYNC_KEY
from tests.support.docingest_service import DOCINGEST, ServiceEnv, start, wait_until_up
from tests.support.redis_db import purge_keys

WORDS = "budget review policy travel notice period offsite venue dashboard ingestion".split()


def write_folder(root: Path, files: int) -> None:
    """`files` small text files, ten per subfolder, each with its own sentence."""
    for number in range(files):
        folder = root / f"team-{number // 10:03d}"
        folder.mkdir(parents=True, exist_ok=True)
        words = " ".join(WORDS[(number + k) % len(WORDS)] for k in range(12))
        (folder / f"note-{number:04d}.txt").write_text(f"Note {number}: {words}.\n")


def uploads(base_url: str) -> int:
    text = httpx.get(f"{base_url}/metrics", timeout=60).text
    found = re.search(r"^docingest_uploads_total (\S+)$", text, re.MULTILINE)
    return int(float(found[1])) if found else 0


def run(base_url: str, *argv: str) -> tuple[float, int, str]:
    """Run `docingest ARGV`; its wall time, the uploads it made and the last line it printed."""
    environ = {k: v for k, v in os.environ.items() if not k.startswith("DOCINGEST_")}
    environ["DOCINGEST_URL"] = base_url
    before = uploads(base_url)
    started = time.perf_counter()
    done = subprocess.run(
        [str(DOCINGEST), *argv], env=environ, capture_output=True, text=True, timeout=3600
    )
    elapsed = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"docingest {' '.join(argv)} exited {done.returncode}:\n{done.stderr}")
    lines = [line for line in done.stdout.splitlines() if line.strip()]
    return elapsed, uploads(base_url) - before, lines[-1] if lines else ""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--files", type=int, default=1000)
    args = parser.parse_args()
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="docingest-bench-sync-") as tmp:
        folder = Path(tmp) / "folder"
        write_folder(folder, args.files)
        env = ServiceEnv(data_dir=Path(tmp) / "data", key_prefix=f"bench-{uuid.uuid4().hex[:10]}:")
        process = start(["serve"], env, name="serve")
        try:
            wait_until_up(process, env.base_url, timeout=900)  # a loaded machine starts slowly
            first = run(env.base_url, "sync", str(folder), "--index", "bench-sync")
            print(f"first sync: {first[0]:.1f} s, {first[1]} uploads ({first[2]})", flush=True)
            again = run(env.base_url, "sync", str(folder), "--index", "bench-sync")
            # The previous way, like for like: the same metadata (the sync's mark), so the
            # service answers every upload `unchanged` and the documents stay the sync's.
            mark = json.dumps({SYNC_KEY: folder.resolve().as_posix()})
            naive = run(
                env.base_url, "ingest", str(folder), "--index", "bench-sync", "--metadata", mark
            )
            again_2 = run(env.base_url, "sync", str(folder), "--index", "bench-sync")
        finally:
            process.stop()
            purge_keys(env.key_prefix)
    load_after = os.getloadavg()
    best = min(again[0], again_2[0])
    print(f"machine: {machine()}")
    print(f"commit: {code_version()}")
    print(f"load average before/after: {load_before[0]:.1f} / {load_after[0]:.1f}")
    print(f"files: {args.files}")
    print(
        f"no-change sync: {again[0]:.2f} s and {again_2[0]:.2f} s, uploads {again[1]}, {again_2[1]}"
    )
    print(f"  ({again[2]})")
    print(f"ingest of the same folder (previous way): {naive[0]:.2f} s, uploads {naive[1]}")
    print(f"ratio ingest / sync wall time: {naive[0] / best:.1f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
