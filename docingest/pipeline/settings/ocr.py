"""The OCR settings (`DOCINGEST_OCR_*`), a base of `docingest.pipeline.settings.Settings`.

Kept in their own module only so that the settings module stays under the module-size
limit; they are read, validated and documented with the rest (`Settings` inherits them, and
the docs' configuration reference and `.env.example` are rendered from them).
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field
from pydantic_settings import BaseSettings


class OcrSettings(BaseSettings):
    """How scans and images are read (`docingest.pipeline.extract.ocr`)."""

    ocr: Literal["auto", "off", "force"] = "auto"
    """`auto` reads with Tesseract the PDF pages that have no text layer, and images;
    `force` reads every PDF page so, ignoring its text layer (for a bad OCR layer); `off`
    never (a scan then fails with `no_text_found`)."""

    ocr_languages: str = Field(default="eng", pattern=r"^[A-Za-z_]+(?:\+[A-Za-z_]+)*$")
    """Tesseract languages joined with `+`, e.g. `eng+deu`; each needs Debian's
    `tesseract-ocr-<lang>` package (`tesseract-ocr-eng` is installed with docingest)."""

    ocr_tessdata_dir: Path | None = None
    """Directory of Tesseract's `<lang>.traineddata` files; None uses `TESSDATA_PREFIX` or
    Debian's `/usr/share/tesseract-ocr/5/tessdata`."""

    ocr_dpi: int = Field(default=300, ge=72, le=600)
    """Resolution PDF pages are rendered at for OCR (Tesseract reads best near 300 DPI)."""

    ocr_cpu_seconds_per_page: float = Field(default=20.0, gt=0)
    """CPU seconds the parsing child is granted for each page it OCRs, on top of its own
    limit and up to `extraction_cpu_seconds`: several times what a 300 DPI page takes
    (BENCHMARKS.md, "OCR (Tesseract 5 through tesserocr)")."""
