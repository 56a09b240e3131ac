"""The public API of `docingest.pipeline`: lazy, complete, and the docs' example runs."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from docingest import pipeline
from tests.support.paths import REPO_DIR
from tests.support.redis_db import TEST_REDIS_URL, purge_keys, unique_prefix

GUIDE = REPO_DIR / "docs" / "guides" / "pipeline.md"


def guide_python_example() -> str:
    """The first python block of the docs' "The pipeline from Python" guide, as written."""
    match = re.search(r"```python\n(.*?)```", GUIDE.read_text(encoding="utf-8"), re.DOTALL)
    assert match is not None, "docs/guides/pipeline.md has no python code block"
    return match.group(1)


def run_python(code: str, *, env: dict[str, str], timeout: float) -> str:
    done = subprocess.run(
        [sys.executable, "-c", code],
        cwd=REPO_DIR,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


def clean_environment() -> dict[str, str]:
    return {name: value for name, value in os.environ.items() if not name.startswith("DOCINGEST_")}


def test_importing_pipeline_loads_no_client_or_runtime() -> None:
    heavy = ("qdrant_client", "onnxruntime", "openai", "redis", "celery", "fastapi")
    code = (
        "import sys; from docingest import pipeline; "
        f"print([m for m in {heavy!r} if m in sys.modules])"
    )
    assert run_python(code, env=clean_environment(), timeout=60).strip() == "[]"


def test_every_exported_name_resolves() -> None:
    assert sorted(pipeline.__all__) == sorted(pipeline._EXPORTS)
    for name in pipeline.__all__:
        assert getattr(pipeline, name).__name__ == name
    assert set(pipeline.__all__) <= set(dir(pipeline))


def test_the_guide_example_runs_as_written(tmp_path: Path) -> None:
    prefix = unique_prefix("guide")
    env = clean_environment() | {
        "DOCINGEST_REDIS_URL": TEST_REDIS_URL,
        "DOCINGEST_REDIS_KEY_PREFIX": prefix,
        "DOCINGEST_DATA_DIR": str(tmp_path / "data"),
    }
    try:
        output = run_python(guide_python_example(), env=env, timeout=270)
    finally:
        purge_keys(prefix)
    lines = output.splitlines()
    assert len(lines) == 5, output  # SearchRequest's default top_k
    scores = [float(line.split()[0]) for line in lines]
    assert scores == sorted(scores, reverse=True), output
    assert all(line.split()[1] == "rfc6455-websocket.txt" for line in lines), output
    assert "close" in output.lower() or "closing" in output.lower(), output
