"""`import docingest` (the SDK) loads none of the service: no pipeline, api or workers, no
Redis, Qdrant or parser library, in a fresh interpreter."""

from __future__ import annotations

import json
import subprocess
import sys

HEAVY = ("pipeline", "api", "workers", "redis", "celery", "qdrant_client", "numpy", "fastapi")


def test_the_sdk_imports_nothing_of_the_service() -> None:
    code = (
        "import json, sys, docingest, docingest.models, docingest.errors; "
        "docingest.Client('http://127.0.0.1:9'); "
        "print(json.dumps(sorted({m.split('.')[0] for m in sys.modules})))"
    )
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    loaded = set(json.loads(run.stdout))
    assert "httpx" in loaded and "pydantic" in loaded
    assert not loaded & set(HEAVY), sorted(loaded & set(HEAVY))
