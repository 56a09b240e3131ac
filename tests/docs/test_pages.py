"""The README stays a front page whose links lead somewhere, and every Python example in it
and in the docs is valid Python. (`make lint` builds the site strictly for the docs' own links;
tests/sdk/test_readme.py and tests/pipeline/test_facade.py run the two main examples.)"""

from __future__ import annotations

import re
import textwrap
from pathlib import Path

import pytest

from tests.support.paths import REPO_DIR

README = REPO_DIR / "README.md"
PAGES = sorted((REPO_DIR / "docs").rglob("*.md"))
_PYTHON_BLOCK = re.compile(r"^( *)```python\n(.*?)^\1```", re.DOTALL | re.MULTILINE)
_LINK = re.compile(r"\]\(([^)\s]+)\)")


def python_blocks(path: Path) -> list[str]:
    """The page's python blocks, those indented in a list item included (dedented)."""
    found = _PYTHON_BLOCK.findall(path.read_text(encoding="utf-8"))
    return [textwrap.dedent(block) for _, block in found]


def test_the_readme_is_a_front_page() -> None:
    lines = README.read_text(encoding="utf-8").splitlines()
    assert len(lines) <= 200, f"README.md has {len(lines)} lines; the manual is docs/"
    for heading in ("## Two commands", "## Install", "## Python SDK"):
        assert heading in lines, heading


def test_the_readme_links_to_files_that_exist() -> None:
    links = _LINK.findall(README.read_text(encoding="utf-8"))
    local = [link.split("#", 1)[0] for link in links if "://" not in link]
    assert len(local) > 10, local
    missing = [link for link in local if not (REPO_DIR / link).is_file()]
    assert not missing, f"README.md links to files that do not exist: {missing}"


@pytest.mark.parametrize("path", [README, *PAGES], ids=lambda path: str(path.relative_to(REPO_DIR)))
def test_every_python_example_compiles(path: Path) -> None:
    for number, block in enumerate(python_blocks(path), start=1):
        compile(block, f"{path.name}, python block {number}", "exec")


def test_the_python_examples_are_found() -> None:
    assert len(python_blocks(README)) == 1
    assert sum(len(python_blocks(page)) for page in PAGES) >= 5
