"""The light install as an application gets it: `pip install docingest` into a fresh venv, from
the lock's client set and the project's own wheel. It holds no service dependency and nothing
but `docingest` at the top level, runs the README's SDK example and the client commands against
a real `docingest serve`, and its `docingest serve` names the extra it needs."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tomllib
import zipfile
from dataclasses import dataclass
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from tests.sdk.test_readme import sdk_example
from tests.support.docingest_service import ServiceEnv
from tests.support.paths import EXAMPLES_DIR, REPO_DIR

UV = REPO_DIR / ".tools" / "bin" / "uv"
"""`make install` puts uv there, from tools/uv.txt (the Makefile's `$(UV)`)."""
PROJECT = tomllib.loads((REPO_DIR / "pyproject.toml").read_text(encoding="utf-8"))["project"]
SERVICE = {
    canonicalize_name(Requirement(line).name)
    for line in PROJECT["optional-dependencies"]["service"]
}
INDEX = "light-install"


def run(command: list[str | Path], *, cwd: Path, env: dict[str, str] | None = None) -> str:
    """Run `command` and return its output; uv runs outside the checkout (`cwd`), so it reads
    none of the project's own uv settings."""
    environ = {
        name: value
        for name, value in os.environ.items()
        if not name.startswith(("DOCINGEST_", "VIRTUAL_ENV"))
    }
    environ |= {"UV_PYTHON_DOWNLOADS": "never", **(env or {})}
    done = subprocess.run(
        [str(part) for part in command], cwd=cwd, env=environ, capture_output=True, text=True,
        timeout=600,
    )  # fmt: skip
    assert done.returncode == 0, f"{command}:\n{done.stdout}\n{done.stderr}"
    return done.stdout


@dataclass
class LightInstall:
    wheel: Path
    python: Path
    requirements: Path

    @property
    def docingest(self) -> Path:
        return self.python.with_name("docingest")


@pytest.fixture(scope="module")
def light(tmp_path_factory: pytest.TempPathFactory) -> LightInstall:
    work = tmp_path_factory.mktemp("light")
    # The wheel, built from a copy of what it ships (a stale build/ in the checkout could add
    # files), with setuptools from the lock's `build` group: no download, as deploy/Dockerfile.
    source = work / "source"
    shutil.copytree(
        REPO_DIR / "docingest", source / "docingest", ignore=shutil.ignore_patterns("__pycache__")
    )
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(REPO_DIR / name, source / name)
    run([UV, "build", "--wheel", "--no-build-isolation", "--python", sys.executable, "--out-dir",
         work / "dist", source], cwd=work)  # fmt: skip
    (wheel,) = (work / "dist").glob("docingest-*.whl")
    # The client set exactly as locked (no extra, no group), every file's sha256 checked.
    requirements = work / "client.txt"
    run([UV, "export", "--locked", "--no-dev", "--no-emit-project", "--format",
         "requirements-txt", "--quiet", "-o", requirements], cwd=REPO_DIR)  # fmt: skip
    run([UV, "venv", "--quiet", "--python", sys.executable, work / "venv"], cwd=work)
    python = work / "venv" / "bin" / "python"
    run([UV, "pip", "install", "--quiet", "--python", python, "--require-hashes", "-r",
         requirements], cwd=work)  # fmt: skip
    run([UV, "pip", "install", "--quiet", "--python", python, "--no-deps", wheel], cwd=work)
    return LightInstall(wheel, python, requirements)


def test_the_wheel_installs_one_top_level_package(light: LightInstall) -> None:
    names = zipfile.ZipFile(light.wheel).namelist()
    dist_info = "-".join(light.wheel.name.split("-")[:2]) + ".dist-info"  # docingest-0.1.0
    assert {name.split("/", 1)[0] for name in names} == {"docingest", dist_info}
    assert {"docingest/py.typed", "docingest/api/static/index.html"} <= set(names)
    assert any(name.startswith("docingest/pipeline/resources/") for name in names)


def test_the_light_install_has_no_service_dependency(light: LightInstall) -> None:
    listed = (
        "import importlib.metadata as m, json; "
        "print(json.dumps([d.name for d in m.distributions()]))"
    )
    names = json.loads(run([light.python, "-c", listed], cwd=light.python.parent))
    installed = {canonicalize_name(name) for name in names}
    locked = {
        canonicalize_name(line.split("==", 1)[0])
        for line in light.requirements.read_text().splitlines()
        if "==" in line and not line.startswith((" ", "#"))
    }
    assert {"fastapi", "celery", "onnxruntime", "qdrant-client"} <= SERVICE
    assert not installed & SERVICE, sorted(installed & SERVICE)
    # exactly the client set and the project (pip and setuptools are not in a uv venv)
    assert installed == locked | {"docingest"}, sorted(installed ^ (locked | {"docingest"}))


def test_the_readme_sdk_example_runs_on_the_light_install(
    light: LightInstall, sdk_serve: ServiceEnv, tmp_path: Path
) -> None:
    shutil.copy(EXAMPLES_DIR / "docling-README.md", tmp_path / "report.pdf")
    output = run(
        [light.python, "-c", sdk_example()], cwd=tmp_path, env={"DOCINGEST_URL": sdk_serve.base_url}
    )
    lines = output.splitlines()
    assert lines and all(line.split()[1] == "report.pdf" for line in lines), output


def test_the_client_commands_run_on_the_light_install(
    light: LightInstall, sdk_serve: ServiceEnv, tmp_path: Path
) -> None:
    note = tmp_path / "tides.txt"
    note.write_text("Spring tides follow the new and the full moon.\n", encoding="utf-8")
    url = ["--url", sdk_serve.base_url]
    run([light.docingest, "ingest", note, "--index", INDEX, *url], cwd=tmp_path)
    found = run(
        [light.docingest, "search", "when are spring tides", "--index", INDEX, "--json", *url],
        cwd=tmp_path,
    )
    assert [hit["document_id"] for hit in json.loads(found)["results"]] == ["tides.txt"]


@pytest.mark.parametrize("command", [["serve"], ["worker"], ["inspect", "README.md"]])
def test_a_service_command_names_the_extra_it_needs(
    light: LightInstall, command: list[str]
) -> None:
    done = subprocess.run(
        [str(light.docingest), *command], cwd=REPO_DIR, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 2, done.stderr
    assert "pip install 'docingest[service]'" in done.stderr
    assert "Traceback" not in done.stderr
