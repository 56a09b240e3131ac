"""The dependency floor excludes the parser and HTTP releases with known vulnerabilities.

`pip-audit` needs a vulnerability service (PyPI's JSON API or OSV), which CI here cannot
reach, so this offline check holds the advisories that matter most to a service that parses
untrusted uploads and speaks HTTP: each direct dependency's lower bound in pyproject.toml (an
indirect one's in `[tool.uv] constraint-dependencies`), and the version installed, must be at
or above the fixed release. `make audit` (run by .ci/run) scans the whole locked set wherever
a vulnerability service answers.
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
    ("pypdf", "7.0.0", "object-stream offsets, XFA decoding work and image size limits"),
    ("starlette", "0.49.1", "CVE-2025-62727: quadratic Range header parsing (DoS)"),
    ("starlette", "1.0.1", "CVE-2026-48710: unchecked Host header poisons request.url.path"),
    ("python-multipart", "0.0.7", "CVE-2024-24762: ReDoS in Content-Type parsing"),
    ("python-multipart", "0.0.18", "CVE-2024-53981: boundary-less preamble DoS"),
    ("python-multipart", "0.0.26", "CVE-2026-40347: preamble/epilogue CPU exhaustion"),
    ("python-multipart", "0.0.27", "CVE-2026-42561: DoS through excessive part headers"),
    ("python-multipart", "0.0.30", "CVE-2026-53539"),
    ("h11", "0.16.0", "CVE-2025-43859: chunked-encoding request smuggling"),
    ("cryptography", "44.0.1", "CVE-2024-12797: vulnerable OpenSSL in the wheels"),
    ("urllib3", "2.5.0", "CVE-2025-50181/50182: redirects not disabled as configured"),
    # Pillow decodes uploaded images for OCR (and python-pptx reads image sizes with it).
    ("pillow", "10.0.1", "CVE-2023-4863: heap overflow in the wheels' libwebp decoder"),
    ("pillow", "10.3.0", "CVE-2024-28219: buffer overflow in _imagingcms"),
]


def _declared_floors() -> dict[str, Version]:
    pyproject = tomllib.loads(PYPROJECT.read_text())
    project = pyproject["project"]
    constraints = pyproject["tool"]["uv"].get("constraint-dependencies", [])
    floors: dict[str, Version] = {}
    # pypdf and cryptography are test and bench dependencies now (PDFium reads uploads).
    extras = [line for lines in project["optional-dependencies"].values() for line in lines]
    for line in [*project["dependencies"], *extras, *constraints]:
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
    assert distribution in floors, f"{distribution} has no floor (or constraint) at all"
    assert floors[distribution] >= Version(fixed), f"raise the floor of {distribution}: {advisory}"
