"""Legacy-format files made at test time from the corpus's modern ones, by LibreOffice.

The corpus holds DOCX, XLSX, PPTX and ODT files but no `.doc`, `.xls`, `.ppt`, `.rtf`, `.ods`
or `.odp`: LibreOffice (Debian's `libreoffice-*-nogui`, installed by `.ci/system-deps`) saves
each modern file in the old format, so a test can compare the two readings of one document.
Converted once per directory (`soffice --convert-to`, a private profile) and cached.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

from docingest.pipeline.extract.office.instance import available
from tests.support.paths import CORPUS_DIR

SOFFICE = "/usr/lib/libreoffice/program/soffice"

TWINS = {
    "doc": ("docx/tika-sample-word-document.docx", "docx/statistics-homework-tables.docx",
            "docx/irish-tax-illustrative-cases.docx",
            "docx/debian-reference-ch04-libreoffice.docx"),
    "rtf": ("docx/tika-sample-word-document.docx", "docx/irish-tax-illustrative-cases.docx"),
    "ppt": ("pptx/fake-power-point.pptx", "pptx/fake-power-point-table.pptx",
            "pptx/fake-power-point-many-pages.pptx"),
    "xls": ("xlsx/stanley-cups.xlsx", "xlsx/2023-half-year-analyses-by-segment.xlsx"),
    "ods": ("xlsx/stanley-cups.xlsx", "xlsx/2023-half-year-analyses-by-segment.xlsx"),
    "odp": ("pptx/fake-power-point.pptx", "pptx/fake-power-point-table.pptx",
            "pptx/fake-power-point-many-pages.pptx"),
}  # fmt: skip
"""For each legacy format, the corpus files it is made from (its modern twins)."""


def require_libreoffice() -> None:
    """Fail, saying what to install, where LibreOffice is missing."""
    if not available():
        raise RuntimeError(
            "LibreOffice is needed: run .ci/system-deps (Debian's libreoffice-writer-nogui, "
            "libreoffice-calc-nogui, libreoffice-impress-nogui and python3-uno)"
        )


def make_twins(directory: Path) -> dict[str, list[tuple[Path, Path]]]:
    """Each legacy format's (legacy file, modern twin) pairs, written under `directory`."""
    require_libreoffice()
    profile = (directory / "profile").as_uri()
    out: dict[str, list[tuple[Path, Path]]] = {}
    for target, sources in TWINS.items():
        folder = directory / target
        folder.mkdir(parents=True, exist_ok=True)
        paths = [CORPUS_DIR / source for source in sources]
        subprocess.run(
            [SOFFICE, f"-env:UserInstallation={profile}", "--headless", "--convert-to", target,
             "--outdir", str(folder), *map(str, paths)],
            check=True, capture_output=True, timeout=600,
        )  # fmt: skip
        out[target] = [(folder / f"{path.stem}.{target}", path) for path in paths]
        missing = [str(legacy) for legacy, _ in out[target] if not legacy.exists()]
        assert not missing, f"LibreOffice did not write {missing}"
    return out


def convert(source: Path, target: str, directory: Path) -> Path:
    """`source` saved as a `.target` file in `directory`."""
    require_libreoffice()
    subprocess.run(
        [SOFFICE, f"-env:UserInstallation={(directory / 'profile').as_uri()}", "--headless",
         "--convert-to", target, "--outdir", str(directory), str(source)],
        check=True, capture_output=True, timeout=600,
    )  # fmt: skip
    return directory / f"{source.stem}.{target}"
