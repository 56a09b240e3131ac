"""The bounds of a PDF page's drawn paths: what ruled headings (`pdf_rules`) and ruled tables
(`pdf_ruled`) read their rules from.

Only top-level objects are read (paths inside form objects are not), and a page with more
than `MAX_OBJECTS` objects is not walked at all: 100,000 tiny objects stay bounded work
(tests/reliability/test_hostile_pdf_structure.py). Each object costs two PDFium calls, so
callers check first whether the page can hold what they look for.
"""

from __future__ import annotations

import ctypes

import pypdfium2 as pdfium
import pypdfium2.raw as pdfium_c

from docingest.pipeline.extract.pdf_calls import object_bounds, object_type, page_object

MAX_OBJECTS = 20_000
"""Page objects looked at per page at most."""

Bounds = tuple[float, float, float, float]
"""(left, bottom, right, top) in PDF points."""


def object_count(page: pdfium.PdfPage) -> int:
    """The page's top-level objects, text included."""
    return int(pdfium_c.FPDFPage_CountObjects(page.raw))


def path_bounds(page: pdfium.PdfPage, count: int | None = None) -> list[Bounds]:
    """The bounds of the page's path objects; none on a page past `MAX_OBJECTS` objects.

    `count` is `object_count(page)` when the caller has it already."""
    raw = page.raw
    count = object_count(page) if count is None else count
    if count > MAX_OBJECTS:
        return []
    path = pdfium_c.FPDF_PAGEOBJ_PATH
    left, bottom, right, top = (ctypes.c_float() for _ in range(4))
    edges = [ctypes.byref(edge) for edge in (left, bottom, right, top)]
    found = []
    for index in range(count):
        obj = page_object(raw, index)
        if object_type(obj) != path:
            continue
        if object_bounds(obj, *edges):
            found.append((left.value, bottom.value, right.value, top.value))
    return found
