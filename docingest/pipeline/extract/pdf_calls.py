"""PDFium functions for the loops that call them once per line, word or page object.

pypdfium2's bindings declare `argtypes`, so ctypes converts and checks every argument of every
call: half of a call's 0.5 µs. These are the same C functions without `argtypes`, at 0.25 µs
(BENCHMARKS.md, "PDF structure"). Nothing is checked, so a caller passes exactly the C types:
the raw handle (`textpage.raw`, `page.raw`, an object handle a function here returned), a
Python int for a C `int`, `ctypes.byref(...)` of a preallocated structure or number for a
pointer, a ctypes object for anything wider than an `int`.
"""

from __future__ import annotations

import ctypes
from typing import Any

import pypdfium2.raw as pdfium_c


def _unchecked(function: Any, restype: Any) -> Any:
    """A copy of the pypdfium2 binding `function` with no `argtypes`."""
    copy = type(function)(ctypes.cast(function, ctypes.c_void_p).value)
    copy.restype = restype
    return copy


font_size = _unchecked(pdfium_c.FPDFText_GetFontSize, ctypes.c_double)
"""(textpage, index) → the character's font size."""

unicode_of = _unchecked(pdfium_c.FPDFText_GetUnicode, ctypes.c_uint)
"""(textpage, index) → the character's code (UTF-16: a surrogate half for each of a pair)."""

loose_char_box = _unchecked(pdfium_c.FPDFText_GetLooseCharBox, ctypes.c_int)
"""(textpage, index, byref(FS_RECTF)) → whether the box was read."""

font_info = _unchecked(pdfium_c.FPDFText_GetFontInfo, ctypes.c_ulong)
"""(textpage, index, buffer, c_ulong(length), byref(c_int flags)) → the name's length + 1."""

page_object = _unchecked(pdfium_c.FPDFPage_GetObject, pdfium_c.FPDF_PAGEOBJECT)
"""(page, index) → the page's object `index` (a null pointer when there is none)."""

object_type = _unchecked(pdfium_c.FPDFPageObj_GetType, ctypes.c_int)
"""(object) → `FPDF_PAGEOBJ_*`."""

object_bounds = _unchecked(pdfium_c.FPDFPageObj_GetBounds, ctypes.c_int)
"""(object, byref(left), byref(bottom), byref(right), byref(top)) → whether it has bounds."""

text_object = _unchecked(pdfium_c.FPDFText_GetTextObject, pdfium_c.FPDF_PAGEOBJECT)
"""(textpage, index) → the text object the character belongs to (null for a generated one)."""

marked_content_id = _unchecked(pdfium_c.FPDFPageObj_GetMarkedContentID, ctypes.c_int)
"""(object) → its marked-content id, -1 when it has none."""
