"""Optical character recognition of page images with Tesseract, through tesserocr.

tesserocr calls Tesseract's C++ API in this process; pytesseract runs the `tesseract`
program once per page, which costs more CPU per page (BENCHMARKS.md, "OCR (Tesseract 5
through tesserocr)"): the program reloads the model and round-trips the image and result
through files every time. In process, the page also counts against the parsing child's
`RLIMIT_CPU` and `RLIMIT_AS`, where a subprocess would get fresh limits of its own.

The tesserocr wheel bundles its own libtesseract (5.5); the language models come from
Debian's `tesseract-ocr-<lang>` packages. Pixels are handed over raw (`SetImageBytes`), so no
image codec bundled in the wheel ever parses an upload's bytes: Pillow and PDFium decode.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Any

from docingest.pipeline.errors import NoTextFound
from docingest.pipeline.extract.ocr_tables import Box, LaidOutText, lay_out

if TYPE_CHECKING:
    from PIL.Image import Image

    from docingest.pipeline.settings import Settings

TESSDATA_CANDIDATES = (
    Path("/usr/share/tesseract-ocr/5/tessdata"),
    Path("/usr/share/tesseract-ocr/4.00/tessdata"),
    Path("/usr/share/tessdata"),
)
"""Where Debian (bookworm, bullseye) and other distributions put the language models."""

MIN_LINE_CONFIDENCE = 50.0
"""Lines Tesseract reads with a lower mean word confidence (0-100) are dropped as noise."""

OcrPageHook = Callable[[], None]
"""Called before each page is recognised (the isolated child grants CPU time there)."""


class OcrMode(StrEnum):
    """When pages are recognised: `auto` those without text, `force` all, `off` none."""

    AUTO = "auto"
    OFF = "off"
    FORCE = "force"


@dataclass(frozen=True, slots=True)
class OcrOptions:
    """What extraction needs to know about OCR, taken from `Settings`."""

    mode: OcrMode = OcrMode.AUTO
    languages: str = "eng"
    tessdata_dir: Path | None = None
    dpi: int = 300
    max_pixels: int = 100_000_000

    @classmethod
    def from_settings(cls, settings: Settings) -> OcrOptions:
        return cls(
            mode=OcrMode(settings.ocr),
            languages=settings.ocr_languages,
            tessdata_dir=settings.ocr_tessdata_dir,
            dpi=settings.ocr_dpi,
            max_pixels=settings.max_image_pixels,
        )


@dataclass(frozen=True, slots=True)
class RecognisedText:
    """One page's OCR: its text (lines, blank lines between paragraphs; a table's rows as
    cells joined by " | ") and mean word confidence from 0 to 1 (None when Tesseract found
    no word); `tables`: the spans `(first, end)` of the text's lines that are tables."""

    text: str
    confidence: float | None
    words: int
    tables: tuple[tuple[int, int], ...] = ()

    def blocks_lines(self) -> tuple[list[str], frozenset[int]]:
        """The lines with each table as one line, and where those are (`ocr_tables`)."""
        return LaidOutText(self.text.split("\n"), self.tables).blocks_lines()


@dataclass(slots=True)
class OcrRecord:
    """Which pages were recognised and how confidently; stored as `document.extra["ocr"]`."""

    pages: list[int] = field(default_factory=list)
    page_confidence: list[float | None] = field(default_factory=list)
    _confidence_sum: float = 0.0
    _words: int = 0

    def add(self, page: int, recognised: RecognisedText) -> None:
        self.pages.append(page)
        self.page_confidence.append(recognised.confidence)
        if recognised.confidence is not None:
            self._confidence_sum += recognised.confidence * recognised.words
            self._words += recognised.words

    def as_extra(self) -> dict[str, Any]:
        """The record as plain JSON: pages, per-page confidence, and the word-weighted mean."""
        mean = round(self._confidence_sum / self._words, 4) if self._words else None
        return {"pages": self.pages, "page_confidence": self.page_confidence, "confidence": mean}


def warm_up() -> None:
    """Load libtesseract and Pillow's image plugins now, in a process that forks parsers."""
    from PIL import Image

    Image.init()
    try:
        import tesserocr  # noqa: F401
    except ImportError:  # reported as `no_text_found` when a file needs OCR
        pass


def tessdata_dir(options: OcrOptions) -> Path:
    """The directory holding the language models: the setting, TESSDATA_PREFIX, or the
    first of `TESSDATA_CANDIDATES` that exists. Raises `NoTextFound` naming what to install."""
    if options.tessdata_dir is not None:
        candidates: tuple[Path, ...] = (options.tessdata_dir,)
    elif os.environ.get("TESSDATA_PREFIX"):
        candidates = (Path(os.environ["TESSDATA_PREFIX"]),)
    else:
        candidates = TESSDATA_CANDIDATES
    found = next((path for path in candidates if path.is_dir()), None)
    missing = [
        language
        for language in options.languages.split("+")
        if found is None or not (found / f"{language}.traineddata").is_file()
    ]
    if found is None or missing:
        where = found or candidates[0]
        packages = " ".join(f"tesseract-ocr-{language}" for language in missing)
        raise NoTextFound(
            f"This file needs OCR, but Tesseract's language data ({', '.join(missing)}) is "
            f"not installed in {where}; install Debian's tesseract-ocr and {packages} "
            f"(apt-get install tesseract-ocr {packages}), or set DOCINGEST_OCR=off."
        )
    return found


class Recogniser:
    """One Tesseract engine, loaded once per document and reused for each of its pages."""

    def __init__(self, options: OcrOptions) -> None:
        try:  # imported here: only scans need libtesseract, and loading it takes time
            import tesserocr
        except ImportError as exc:
            raise NoTextFound(
                "This file needs OCR, but the tesserocr package is not installed; install "
                "docingest with its dependencies, or set DOCINGEST_OCR=off."
            ) from exc
        path = tessdata_dir(options)
        try:
            self._api = tesserocr.PyTessBaseAPI(path=str(path), lang=options.languages)
        except RuntimeError as exc:  # a model file that is there but does not load
            raise NoTextFound(
                f"Tesseract could not load the language data '{options.languages}' from "
                f"{path} ({exc}); reinstall Debian's tesseract-ocr language packages."
            ) from exc
        self._dpi = options.dpi

    def read(self, image: Image, *, dpi: int | None = None) -> RecognisedText:
        """Recognise a greyscale ("L") or RGB image; `dpi` is its resolution when known."""
        if image.mode not in ("L", "RGB"):
            image = image.convert("RGB" if image.mode in ("RGBA", "P", "CMYK") else "L")
        depth = 1 if image.mode == "L" else 3
        width, height = image.size
        self._api.SetImageBytes(image.tobytes(), width, height, depth, width * depth)
        self._api.SetSourceResolution(dpi or self._dpi)
        self._api.Recognize()
        lines = _confident_lines(self._words())
        confidences = [confidence for line in lines for _, confidence, _ in line]
        laid = lay_out([[(word, box) for word, _, box in line] for line in lines])
        mean = sum(confidences) / len(confidences) / 100 if confidences else None
        return RecognisedText(
            text="\n".join(laid.lines),
            confidence=None if mean is None else round(mean, 4),
            words=len(confidences),
            tables=laid.tables,
        )

    def _words(self) -> Iterator[tuple[str, float, bool, bool, Box]]:
        """Each recognised word with its confidence (0-100), whether it opens a line and
        a paragraph, and its box."""
        from tesserocr import RIL, iterate_level

        iterator = self._api.GetIterator()
        if iterator is None:  # nothing on the page
            return
        for word in iterate_level(iterator, RIL.WORD):
            try:
                text = (word.GetUTF8Text(RIL.WORD) or "").strip()
            except RuntimeError:  # tesserocr's "No text returned" for an empty word box
                continue
            if text:
                yield (
                    text,
                    float(word.Confidence(RIL.WORD)),
                    word.IsAtBeginningOf(RIL.TEXTLINE),
                    word.IsAtBeginningOf(RIL.PARA),
                    word.BoundingBox(RIL.WORD) or (0, 0, 0, 0),
                )

    def close(self) -> None:
        self._api.End()


def _confident_lines(
    words: Iterable[tuple[str, float, bool, bool, Box]],
) -> list[list[tuple[str, float, Box]]]:
    """Group words into lines, an empty line between paragraphs, and drop each line whose
    mean confidence is below `MIN_LINE_CONFIDENCE`: Tesseract reads illustrations as strings
    of junk ("Hesse ‘ PANE 04 ty" beside Huckleberry Finn's text, at 14-41), while a real
    line keeps an odd badly read word ("root" at 19 among words at 93-97)."""
    lines: list[list[tuple[str, float, Box]]] = []
    current: list[tuple[str, float, Box]] = []

    def finish() -> None:
        if current and sum(c for _, c, _ in current) / len(current) >= MIN_LINE_CONFIDENCE:
            lines.append(list(current))
        current.clear()

    for text, confidence, opens_line, opens_paragraph, box in words:
        if opens_line:
            finish()
            if opens_paragraph and lines and lines[-1]:
                lines.append([])
        current.append((text, confidence, box))
    finish()
    return lines


class LazyRecogniser:
    """Loads Tesseract on the first page that needs it, and remembers why it could not."""

    def __init__(
        self,
        options: OcrOptions,
        *,
        on_page: OcrPageHook | None = None,
        record: OcrRecord | None = None,
    ) -> None:
        """`record`: where the pages read are recorded (a new one by default), for a caller
        that follows them while the document is still being extracted."""
        self.options = options
        self.record = OcrRecord() if record is None else record
        self.unavailable: NoTextFound | None = None
        self._on_page = on_page
        self._recogniser: Recogniser | None = None

    def read(self, image: Image, *, page: int, dpi: int | None = None) -> RecognisedText | None:
        """Recognise page `page`; None when Tesseract is unavailable in `auto` mode (the
        error is kept in `unavailable`); raises it in `force` mode."""
        if self.unavailable is None and self._recogniser is None:
            try:
                self._recogniser = Recogniser(self.options)
            except NoTextFound as exc:
                self.unavailable = exc
        if self._recogniser is None:
            if self.options.mode is OcrMode.FORCE and self.unavailable is not None:
                raise self.unavailable
            return None
        if self._on_page is not None:
            self._on_page()
        recognised = self._recogniser.read(image, dpi=dpi)
        self.record.add(page, recognised)
        return recognised

    def close(self) -> None:
        if self._recogniser is not None:
            self._recogniser.close()
            self._recogniser = None
