"""Comments point to a BENCHMARKS.md section instead of repeating its figures; each section
they name (`BENCHMARKS.md, "Embedded store"`) must be a heading there, or the start of one."""

from __future__ import annotations

import re
from pathlib import Path

from tests.support.paths import REPO_DIR

SOURCES = ("pipeline", "api", "workers", "docingest", "bench")
REFERENCE = re.compile(r'BENCHMARKS\.md, "([^"]+)"')


def _headings() -> list[str]:
    text = (REPO_DIR / "BENCHMARKS.md").read_text(encoding="utf-8")
    return [line.lstrip("#").strip() for line in text.splitlines() if line.startswith("#")]


def _references(path: Path) -> list[str]:
    # A reference may wrap: across docstring lines, or across `#` comment lines.
    text = re.sub(r"\n\s*#\s?", " ", path.read_text(encoding="utf-8"))
    return [match.group(1).rstrip(".,") for match in REFERENCE.finditer(" ".join(text.split()))]


def test_every_benchmarks_section_named_in_the_code_exists() -> None:
    headings = _headings()
    paths = [
        *(path for source in SOURCES for path in sorted((REPO_DIR / source).rglob("*.py"))),
        REPO_DIR / "pyproject.toml",
    ]
    named = {
        (path.relative_to(REPO_DIR).as_posix(), name)
        for path in paths
        for name in _references(path)
    }
    assert named, "no reference found: has the pattern changed?"
    missing = sorted(
        (path, name) for path, name in named if not any(h.startswith(name) for h in headings)
    )
    assert missing == [], "sections BENCHMARKS.md does not have (renamed?)"
