"""The README's SDK example and its curl block, run as written against a real `docingest serve`."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
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


def curl_commands(heading: str = "## Use the service with curl") -> list[str]:
    """The commands of the sh block under the README's curl heading, in order: a command starts
    at a line that starts with `curl` and runs on over its continuation lines (a `\\` or a quoted
    body spread over lines), up to a comment, a blank line or the next command."""
    section = README.read_text().split(heading, 1)[1]
    found = re.search(r"```sh\n(.*?)```", section, re.DOTALL)
    assert found, "the README's curl section has no sh block"
    commands: list[str] = []
    for line in found.group(1).splitlines():
        if line.startswith("curl "):
            commands.append(line)
        elif commands and line.strip() and not line.lstrip().startswith("#"):
            if commands[-1].endswith("\n"):  # the command already ended
                continue
            commands[-1] += "\n" + line
        elif commands:
            commands[-1] = commands[-1].rstrip("\n") + "\n"
    return [command.strip() for command in commands]


def test_the_readme_curl_block_runs_top_to_bottom(sdk_serve: ServiceEnv, tmp_path: Path) -> None:
    """Each curl line as written, with the system's curl, against a real `docingest serve`: the
    address is the test service's, JOB_ID the upload's job, and the poll of the job is repeated
    (as "poll" says) until the job is finished. Any HTTP error fails the command
    (`fail-with-body` in a curlrc of the test's own)."""
    curl = shutil.which("curl")
    if curl is None:
        pytest.skip("no curl on this machine")
    (tmp_path / ".curlrc").write_text("fail-with-body\nmax-time = 120\n")
    environ = {**os.environ, "CURL_HOME": str(tmp_path)}
    commands = curl_commands()
    assert len(commands) == 3, commands  # upload, poll, search
    job_id: str | None = None
    answers: list[dict[str, object]] = []
    for command in commands:
        command = command.replace("http://127.0.0.1:8000", sdk_serve.base_url)
        if "JOB_ID" in command:
            assert job_id is not None, f"JOB_ID before any upload: {command}"
            command = command.replace("JOB_ID", job_id)
        wait_until = time.monotonic() + 300  # a deadline with room: a loaded machine is slow
        while True:
            run = subprocess.run(
                ["bash", "-c", command], cwd=README.parent, env=environ,
                capture_output=True, text=True, timeout=300,
            )  # fmt: skip
            assert run.returncode == 0, f"{command}\n{run.stdout}\n{run.stderr}"
            answer = json.loads(run.stdout)
            polling = "/v1/jobs/" in command and answer.get("status") in ("queued", "processing")
            if not polling or time.monotonic() > wait_until:
                break
            time.sleep(0.5)
        job_id = job_id or answer.get("job_id")
        answers.append(answer)
    upload, job, search = answers
    assert upload["document_id"] == "federal-register-2020-17221.pdf"
    assert job["status"] == "completed", job
    results = search["results"]
    assert isinstance(results, list) and results
    assert results[0]["document_id"] == "federal-register-2020-17221.pdf"
