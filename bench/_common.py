"""What every benchmark script needs: the shared corpus and a one-line machine description."""

from __future__ import annotations

import os
import platform
import re
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def find_corpus() -> Path:
    """The shared sample corpus: `DOCINGEST_CORPUS_DIR`, else `../shared/corpus`."""
    for candidate in (os.environ.get("DOCINGEST_CORPUS_DIR"), REPO.parent / "shared" / "corpus"):
        if candidate and (Path(candidate) / "README.md").is_file():
            return Path(candidate)
    return Path("/work/shared/corpus")


def machine() -> str:
    """CPU model, CPU count and Python version, for the benchmark record."""
    cpuinfo = Path("/proc/cpuinfo")
    names = re.findall(r"model name\s*:\s*(.+)", cpuinfo.read_text()) if cpuinfo.exists() else []
    model = names[0] if names else platform.machine()
    return f"{model}, {os.cpu_count()} CPUs, Python {platform.python_version()}"


def run_in_trees(script: str, child_args: list[str], baseline: Path | None) -> None:
    """Run `script --child *child_args` once per tree (the baseline first, then this one),
    each with its own code first on the path, and print each child's last word and the load
    average at start and end: the previous code beside this one in one run."""
    import subprocess
    import sys

    print(f"load average at start: {os.getloadavg()}")
    trees = [("this tree", REPO)]
    if baseline:
        trees.insert(0, (f"baseline {baseline}", baseline.resolve()))
    for label, tree in trees:
        command = [sys.executable, script, "--child", *child_args]
        env = os.environ | {"PYTHONPATH": str(tree)}
        result = subprocess.run(command, env=env, cwd=tree, capture_output=True, text=True)
        print(f"{label}: {result.stdout.strip() or result.stderr.strip()[-2000:]}", flush=True)
    print(f"load average at end: {os.getloadavg()}")
