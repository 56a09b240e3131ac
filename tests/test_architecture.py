"""The tree as ARCHITECTURE.md draws it: one top-level package, a small root in
`docingest/pipeline/`, a package per stage that says in one line what it holds, short modules,
no import cycles between packages."""

from __future__ import annotations

import ast
import os
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from tests.support.paths import REPO_DIR

PACKAGE = REPO_DIR / "docingest"
PIPELINE = PACKAGE / "pipeline"
SERVICE_PACKAGES = ("api", "workers", "pipeline")
SHARED_PACKAGE = "common"
"""What the client and the service share: neither a client module nor a service package."""
MAX_ROOT_MODULES = 14
MAX_MODULE_LINES = 450
LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")


def _subpackages() -> list[Path]:
    """Every directory under `docingest/pipeline/` that holds Python modules (not data)."""
    return sorted(
        path
        for path in PIPELINE.rglob("*")
        if path.is_dir() and path.name != "__pycache__" and any(path.glob("*.py"))
    )


SUBPACKAGES = _subpackages()
SUBPACKAGE_IDS = [path.relative_to(PIPELINE).as_posix() for path in SUBPACKAGES]


def test_the_root_of_pipeline_holds_only_what_every_stage_shares() -> None:
    root = sorted(path.name for path in PIPELINE.glob("*.py"))
    assert len(root) <= MAX_ROOT_MODULES, f"{len(root)} modules in docingest/pipeline/: {root}"


@pytest.mark.parametrize("package", SUBPACKAGES, ids=SUBPACKAGE_IDS)
def test_each_package_says_in_one_line_what_it_holds(package: Path) -> None:
    init = package / "__init__.py"
    assert init.is_file(), f"{package.relative_to(REPO_DIR)} has no __init__.py"
    docstring = ast.get_docstring(ast.parse(init.read_text(encoding="utf-8")))
    assert docstring, f"{init.relative_to(REPO_DIR)} has no docstring"
    # One sentence, which may wrap onto a second physical line: no paragraph after it.
    lines = docstring.splitlines()
    assert len(lines) <= 2 and "" not in lines, f"{init.relative_to(REPO_DIR)}: {docstring!r}"
    sentence = " ".join(docstring.split())
    assert not re.search(r"[.!?] +[A-Z]", sentence), f"more than one sentence: {sentence!r}"
    assert len(sentence.split()) >= 4, f"says too little: {sentence!r}"


def test_no_module_is_over_450_lines() -> None:
    long = {
        path.relative_to(REPO_DIR).as_posix(): count
        for path in sorted(PACKAGE.rglob("*.py"))
        if (count := len(path.read_text(encoding="utf-8").splitlines())) > MAX_MODULE_LINES
    }
    assert long == {}, f"modules over {MAX_MODULE_LINES} lines: split them by concept"


@pytest.mark.parametrize("package", SUBPACKAGES, ids=SUBPACKAGE_IDS)
def test_architecture_md_names_every_package(package: Path) -> None:
    text = (REPO_DIR / "ARCHITECTURE.md").read_text(encoding="utf-8")
    name = f"docingest/pipeline/{package.relative_to(PIPELINE).as_posix()}/"
    # The package itself, not only a module of it: ".../jobs/", not ".../jobs/job.py".
    assert re.search(re.escape(name) + r"(?![\w.])", text), f"ARCHITECTURE.md never names {name}"


# --- the import contracts, on a copy of the tree ------------------------------------------


def _contract_name(contract_id: str) -> str:
    config = tomllib.loads((REPO_DIR / "pyproject.toml").read_text(encoding="utf-8"))
    contracts = config["tool"]["importlinter"]["contracts"]
    return next(contract["name"] for contract in contracts if contract["id"] == contract_id)


def _copy_tree(destination: Path) -> Path:
    destination.mkdir()
    shutil.copytree(
        PACKAGE,
        destination / PACKAGE.name,
        ignore=shutil.ignore_patterns("__pycache__", "*.pyc"),
    )
    shutil.copy(REPO_DIR / "pyproject.toml", destination / "pyproject.toml")
    return destination


def _lint_imports(tree: Path) -> tuple[int, str]:
    """Run lint-imports on `tree` (first on the path, so the copy is analysed, not the
    installed package); its exit status and its output with the line wrapping undone."""
    path = [str(tree), *filter(None, [os.environ.get("PYTHONPATH")])]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(path)}
    done = subprocess.run(
        [str(LINT_IMPORTS), "--no-cache", "--no-logo"],
        cwd=tree,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    return done.returncode, " ".join((done.stdout + done.stderr).split())


def test_the_import_contracts_hold(tmp_path: Path) -> None:
    # `make lint` runs them too; here they are the baseline of the planted cycles below.
    status, output = _lint_imports(_copy_tree(tmp_path / "tree"))
    assert status == 0, output
    assert "0 broken" in output


@pytest.mark.parametrize(
    ("module", "planted"),
    [
        # the store above the services
        ("docingest/pipeline/store/models.py", "docingest.pipeline.services"),
        # job state above the runner
        ("docingest/pipeline/jobs/state.py", "docingest.pipeline.ingest.runner"),
    ],
)
def test_a_planted_cycle_breaks_the_pipeline_layers(
    tmp_path: Path, module: str, planted: str
) -> None:
    status, output = _lint_imports(_plant(tmp_path, module, planted))
    assert status != 0, output
    assert f"{_contract_name('pipeline-layers')} BROKEN" in output
    assert planted in output


@pytest.mark.parametrize(
    ("module", "planted", "contract"),
    [
        ("docingest/pipeline/services.py", "docingest.commands", "service-imports-no-client"),
        ("docingest/workers/tasks.py", "docingest._client", "service-imports-no-client"),
        ("docingest/pipeline/keys.py", "docingest.workers.app", "layers"),
        ("docingest/_client.py", "docingest.pipeline.settings", "sdk-stays-light"),
        ("docingest/common/addresses.py", "docingest.pipeline.errors", "common-stands-alone"),
        ("docingest/common/addresses.py", "docingest.errors", "common-stands-alone"),
        ("docingest/common/addresses.py", "httpx", "common-stands-alone"),
    ],
)
def test_a_planted_import_breaks_the_contract_that_forbids_it(
    tmp_path: Path, module: str, planted: str, contract: str
) -> None:
    status, output = _lint_imports(_plant(tmp_path, module, planted))
    assert status != 0, output
    assert f"{_contract_name(contract)} BROKEN" in output


def _forbidden_modules(contract_id: str) -> set[str]:
    config = tomllib.loads((REPO_DIR / "pyproject.toml").read_text(encoding="utf-8"))
    contracts = config["tool"]["importlinter"]["contracts"]
    contract = next(c for c in contracts if c["id"] == contract_id)
    return {name.removeprefix("docingest.") for name in contract["forbidden_modules"]}


def _children() -> set[str]:
    """The names of the package's modules and subpackages."""
    return {
        path.stem if path.suffix == ".py" else path.name
        for path in PACKAGE.iterdir()
        if (path.suffix == ".py" or (path / "__init__.py").is_file()) and path.stem != "__init__"
    }


def test_the_service_is_forbidden_every_client_module() -> None:
    """`service-imports-no-client` lists the package's other modules by name (import-linter has
    no "all but"), so a new client module must join the list."""
    listed = _forbidden_modules("service-imports-no-client")
    assert listed == _children() - set(SERVICE_PACKAGES) - {SHARED_PACKAGE}


def test_the_shared_package_is_forbidden_every_other_module() -> None:
    listed = _forbidden_modules("common-stands-alone")
    assert {name for name in listed if "." not in name and name in _children()} == (
        _children() - {SHARED_PACKAGE}
    )


def test_the_shared_package_imports_the_standard_library_only() -> None:
    """Beyond the contract's list: no third-party package at all, so both sides may import it
    whatever they have installed."""
    found: set[str] = set()
    for path in sorted((PACKAGE / SHARED_PACKAGE).rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                found.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                found.add(node.module)
    outside = {
        name
        for name in found
        if name.split(".")[0] not in sys.stdlib_module_names
        and not name.startswith(f"docingest.{SHARED_PACKAGE}")
    }
    assert outside == set()


def _plant(tmp_path: Path, module: str, planted: str) -> Path:
    """A copy of the tree in which `module` imports `planted`."""
    tree = _copy_tree(tmp_path / "tree")
    with (tree / module).open("a", encoding="utf-8") as source:
        source.write(f"\nimport {planted}  # planted by tests/test_architecture.py\n")
    return tree
