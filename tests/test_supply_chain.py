"""The dependency floor excludes the parser and HTTP releases with known vulnerabilities.

`pip-audit` needs a vulnerability service (PyPI's JSON API or OSV), which CI here cannot
reach, so this offline check holds the advisories that matter most to a service that parses
untrusted uploads and speaks HTTP: each direct dependency's lower bound in pyproject.toml, and
the version installed (direct or transitive), must be at or above the fixed release. Run
`make audit` where the network allows for the full database.
"""

from __future__ import annotations

import tomllib
from importlib.metadata import version

import pytest
from packaging.requirements import Requirement
from packaging.version import Version

from tests.support.paths import REPO_DIR

PYPROJECT = REPO_DIR / "pyproject.toml"

ADVISORIES = [
    # (distribution, first fixed release, advisory)
    ("pypdf", "3.9.0", "CVE-2023-36464: infinite loop on a malformed comment"),
    ("pypdf", "6.0.0", "CVE-2025-55197: memory exhaustion through FlateDecode streams"),
    ("starlette", "0.40.0", "CVE-2024-47874: unbounded multipart form fields (DoS)"),
    ("starlette", "0.47.2", "CVE-2025-54121: large multipart files block the event loop"),
    ("starlette", "0.49.1", "CVE-2025-62727: quadratic Range header parsing (DoS)"),
    ("python-multipart", "0.0.7", "CVE-2024-24762: ReDoS in Content-Type parsing"),
    ("python-multipart", "0.0.18", "CVE-2024-53981: boundary-less preamble DoS"),
    ("h11", "0.16.0", "CVE-2025-43859: chunked-encoding request smuggling"),
    ("cryptography", "44.0.1", "CVE-2024-12797: vulnerable OpenSSL in the wheels"),
    ("urllib3", "2.5.0", "CVE-2025-50181/50182: redirects not disabled as configured"),
    # Pillow decodes uploaded images for OCR (and python-pptx reads image sizes with it).
    ("pillow", "10.0.1", "CVE-2023-4863: heap overflow in the wheels' libwebp decoder"),
    ("pillow", "10.3.0", "CVE-2024-28219: buffer overflow in _imagingcms"),
]


def _declared_floors() -> dict[str, Version]:
    project = tomllib.loads(PYPROJECT.read_text())["project"]
    floors: dict[str, Version] = {}
    # pypdf and cryptography are test and bench dependencies now (PDFium reads uploads).
    extras = [line for lines in project["optional-dependencies"].values() for line in lines]
    for line in [*project["dependencies"], *extras]:
        requirement = Requirement(line)
        for spec in requirement.specifier:
            if spec.operator in (">=", "=="):
                floors[requirement.name.lower()] = Version(spec.version)
    return floors


@pytest.mark.parametrize(("distribution", "fixed", "advisory"), ADVISORIES)
def test_installed_release_has_the_fix(distribution: str, fixed: str, advisory: str) -> None:
    assert Version(version(distribution)) >= Version(fixed), advisory


@pytest.mark.parametrize(("distribution", "fixed", "advisory"), ADVISORIES)
def test_direct_dependencies_cannot_resolve_below_the_fix(
    distribution: str, fixed: str, advisory: str
) -> None:
    floors = _declared_floors()
    if distribution not in floors:  # transitive: the installed check above covers it
        assert distribution in {"h11", "urllib3", "pillow"}, (
            f"{distribution} is no longer a dependency?"
        )
        return
    assert floors[distribution] >= Version(fixed), f"raise the floor of {distribution}: {advisory}"
