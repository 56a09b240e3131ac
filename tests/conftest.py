"""Shared fixtures: where the sample corpus and the small fixtures live."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

TESTS_DIR = Path(__file__).parent
FIXTURES_DIR = TESTS_DIR / "fixtures"


def _find_corpus() -> Path:
    candidates = [
        os.environ.get("DOCINGEST_CORPUS_DIR"),
        TESTS_DIR.parent.parent / "shared" / "corpus",
        "/work/shared/corpus",
    ]
    for candidate in candidates:
        if candidate and (Path(candidate) / "README.md").is_file():
            return Path(candidate)
    raise RuntimeError(
        "The sample corpus was not found; set DOCINGEST_CORPUS_DIR to ../shared/corpus"
    )


CORPUS_DIR = _find_corpus()


@pytest.fixture(scope="session")
def corpus_dir() -> Path:
    """The shared corpus of real public documents (read-only)."""
    return CORPUS_DIR


@pytest.fixture(scope="session")
def fixtures_dir() -> Path:
    """Small documents copied into the repository."""
    return FIXTURES_DIR
