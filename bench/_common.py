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
