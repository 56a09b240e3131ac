"""Where the repository, its examples and the shared sample corpus are."""

from __future__ import annotations

import os
from pathlib import Path

TESTS_DIR = Path(__file__).resolve().parent.parent
REPO_DIR = TESTS_DIR.parent
EXAMPLES_DIR = REPO_DIR / "examples"


def _find_corpus() -> Path:
    candidates = [
        os.environ.get("DOCINGEST_CORPUS_DIR"),
        REPO_DIR.parent / "shared" / "corpus",
        "/work/shared/corpus",
    ]
    for candidate in candidates:
        if candidate and (Path(candidate) / "README.md").is_file():
            return Path(candidate)
    raise RuntimeError(
        "The sample corpus was not found; set DOCINGEST_CORPUS_DIR to ../shared/corpus"
    )


CORPUS_DIR = _find_corpus()
"""The shared corpus of real public documents (read-only)."""
