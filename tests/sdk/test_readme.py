"""The README's SDK example, run exactly as written against a real `docingest serve`."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from tests.support.docingest_service import ServiceEnv
from tests.support.paths import EXAMPLES_DIR

README = Path(__file__).resolve().parents[2] / "README.md"


def sdk_example() -> str:
    """The python block under the README's "Python SDK" heading."""
    section = README.read_text().split("## Python SDK", 1)[1]
    found = re.search(r"```python\n(.*?)```", section, re.DOTALL)
    assert found, "the README's Python SDK section has no python block"
    return found.group(1)


def test_the_example_is_five_lines() -> None:
    lines = [line for line in sdk_example().splitlines() if line.strip()]
    assert len(lines) == 5, lines


@pytest.mark.parametrize("address", ["url", "host-and-port"])
def test_the_readme_example_runs(sdk_serve: ServiceEnv, tmp_path: Path, address: str) -> None:
    """Run it as the README says, with the service named as the CLI names it: by DOCINGEST_URL,
    or by the DOCINGEST_HOST and DOCINGEST_PORT that `make run` on another port sets."""
    shutil.copy(EXAMPLES_DIR / "docling-README.md", tmp_path / "report.pdf")
    environ = {k: v for k, v in os.environ.items() if not k.startswith("DOCINGEST_")}
    if address == "url":
        environ["DOCINGEST_URL"] = sdk_serve.base_url
    else:
        parts = urlsplit(sdk_serve.base_url)
        environ["DOCINGEST_HOST"], environ["DOCINGEST_PORT"] = str(parts.hostname), str(parts.port)
    run = subprocess.run(
        [sys.executable, "-c", sdk_example()],
        cwd=tmp_path, env=environ, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr
    lines = run.stdout.splitlines()
    assert lines and all(line.split()[1] == "report.pdf" for line in lines), run.stdout
