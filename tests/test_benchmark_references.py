"""Comments point to a BENCHMARKS.md section instead of repeating its figures; each section
they name (`BENCHMARKS.md, "Embedded store"`) must be a heading there, or the start of one.
The decision records name their evidence the same way, and code that points to a decision
record (`docs/design/decisions/0009-qdrant-edge-embedded-store.md`) must name one that exists."""

from __future__ import annotations

import re
from pathlib import Path

from tests.support.paths import REPO_DIR

SOURCES = ("docingest", "bench", "tests")
DECISIONS = REPO_DIR / "docs" / "design" / "decisions"
REFERENCE = re.compile(r'BENCHMARKS\.md, "([^"]+)"')
DECISION_PATH = re.compile(r"docs/design/decisions/([0-9]{4}-[a-z0-9-]+\.md)")


def _headings() -> list[str]:
    text = (REPO_DIR / "BENCHMARKS.md").read_text(encoding="utf-8")
    return [line.lstrip("#").strip() for line in text.splitlines() if line.startswith("#")]


def _text(path: Path) -> str:
    # A reference may wrap: across docstring lines, or across `#` comment lines.
    text = re.sub(r"\n\s*#\s?", " ", path.read_text(encoding="utf-8"))
    return " ".join(text.split())


def _references(path: Path) -> list[str]:
    return [match.group(1).rstrip(".,") for match in REFERENCE.finditer(_text(path))]


def _code() -> list[Path]:
    return [
        *(path for source in SOURCES for path in sorted((REPO_DIR / source).rglob("*.py"))),
        REPO_DIR / "pyproject.toml",
    ]


def _records() -> list[Path]:
    return sorted(DECISIONS.glob("[0-9][0-9][0-9][0-9]-*.md"))


def test_every_benchmarks_section_named_in_the_code_and_the_records_exists() -> None:
    headings = _headings()
    named = {
        (path.relative_to(REPO_DIR).as_posix(), name)
        for path in [*_code(), *_records()]
        for name in _references(path)
    }
    assert named, "no reference found: has the pattern changed?"
    missing = sorted(
        (path, name) for path, name in named if not any(h.startswith(name) for h in headings)
    )
    assert missing == [], "sections BENCHMARKS.md does not have (renamed?)"


def test_every_decision_record_named_in_the_code_exists() -> None:
    named = {
        (path.relative_to(REPO_DIR).as_posix(), match.group(1))
        for path in _code()
        for match in DECISION_PATH.finditer(_text(path))
    }
    missing = sorted((path, name) for path, name in named if not (DECISIONS / name).is_file())
    assert missing == [], "decision records that do not exist (renamed?)"


def test_every_decision_record_is_in_the_index_and_has_its_sections() -> None:
    index = (DECISIONS / "index.md").read_text(encoding="utf-8")
    records = _records()
    assert records, "no decision record found"
    for record in records:
        assert f"]({record.name})" in index, f"{record.name} is not linked from index.md"
        text = record.read_text(encoding="utf-8")
        sections = [line[3:].strip() for line in text.splitlines() if line.startswith("## ")]
        assert sections == ["Context", "Decision", "Consequences", "Evidence"], record.name
