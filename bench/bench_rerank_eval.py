"""Retrieval quality with and without a rerank endpoint, through a whole `docingest serve`.

Run: .venv/bin/python bench/bench_rerank_eval.py --rerank-url URL [--rerank-provider cohere]
         [--rerank-model NAME] [--rerank-api-key KEY] [--dataset DIR] [--data-dir DIR]
         [--port 8765] [--json]

Starts `docingest serve` on a data directory of its own (kept, so a second run skips the
ingestion: `docingest eval --ingest` is resumable) with the rerank settings of the HTTP API v1.2
(`DOCINGEST_RERANK_PROVIDER`, `_URL`, `_API_KEY`, `_MODEL`; the key may also come from the
environment), loads the BEIR corpus of `--dataset` (SciFact by default) through the API, and
runs `docingest eval --rerank`: every mode with `"rerank": false` and `"rerank": true`, so
the ratio is measured in one run against the same index. Anyone with an endpoint (Cohere,
Jina, Voyage, a vLLM or Infinity server, Hugging Face TEI, or an OpenAI-compatible chat model
for `llm`) can measure what it adds on their data. Quality of a reranker cannot be measured
here (no model is installable offline; issue 28 quotes published SciFact figures).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))

from _common import find_corpus  # noqa: E402

DOCINGEST = ROOT / ".venv" / "bin" / "docingest"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rerank-url", required=True)
    parser.add_argument("--rerank-provider", default="cohere", help="cohere, tei or llm")
    parser.add_argument("--rerank-model")
    parser.add_argument("--rerank-api-key", default=os.environ.get("DOCINGEST_RERANK_API_KEY"))
    parser.add_argument("--dataset", type=Path, help="a BEIR folder (default: SciFact)")
    parser.add_argument("--index", default="bench-rerank")
    parser.add_argument("--data-dir", type=Path, default=Path("/tmp/docingest-bench-rerank"))
    parser.add_argument("--port", type=int, default=8765)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    dataset = args.dataset or find_corpus() / "retrieval" / "scifact"
    env = {k: v for k, v in os.environ.items() if not k.startswith("DOCINGEST_")}
    env.update(
        {
            "DOCINGEST_DATA_DIR": str(args.data_dir),
            "DOCINGEST_PORT": str(args.port),
            "DOCINGEST_REDIS_KEY_PREFIX": "bench-rerank:",
            "DOCINGEST_RERANK_PROVIDER": args.rerank_provider,
            "DOCINGEST_RERANK_URL": args.rerank_url,
        }
    )
    if args.rerank_model:
        env["DOCINGEST_RERANK_MODEL"] = args.rerank_model
    if args.rerank_api_key:
        env["DOCINGEST_RERANK_API_KEY"] = args.rerank_api_key
    url = f"http://127.0.0.1:{args.port}"
    serve = subprocess.Popen([str(DOCINGEST), "serve"], env=env, stdout=sys.stderr)
    try:
        deadline = time.monotonic() + 180
        while True:
            try:
                if httpx.get(f"{url}/healthz", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if serve.poll() is not None or time.monotonic() > deadline:
                print("docingest serve did not start", file=sys.stderr)
                return 1
            time.sleep(1)
        print(f"load average at start: {os.getloadavg()[0]:.1f}", file=sys.stderr)
        command = [
            str(DOCINGEST), "--url", url, "eval", str(dataset), "--index", args.index,
            "--ingest", str(dataset / "corpus.jsonl"), "--rerank",
        ]  # fmt: skip
        if args.json:
            command.append("--json")
        done = subprocess.run(command, env=env, check=False)
        print(f"load average at end: {os.getloadavg()[0]:.1f}", file=sys.stderr)
        return done.returncode
    finally:
        serve.terminate()
        serve.wait(timeout=60)


if __name__ == "__main__":
    sys.exit(main())
