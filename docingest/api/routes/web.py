"""`/`: the web page, and its scripts and styles under `/static` (shipped in the package).

The page itself needs no API key, so a browser can load it and then ask for one; every API
call the page makes sends the key from the browser's session storage like any other client.
"""

from __future__ import annotations

from pathlib import Path

from fastapi import APIRouter
from fastapi.responses import FileResponse
from starlette.staticfiles import StaticFiles

STATIC_DIR = Path(__file__).resolve().parent.parent / "static"

PAGE_HEADERS = {
    "Cache-Control": "no-cache",
    "Content-Security-Policy": (
        "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
        "connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; "
        "frame-ancestors 'none'"
    ),
    "Referrer-Policy": "no-referrer",
    "X-Content-Type-Options": "nosniff",
}
"""The page runs only its own script and talks only to this server (no CDN, works offline)."""

router = APIRouter(include_in_schema=False)
router.mount("/static", StaticFiles(directory=STATIC_DIR), name="static")


@router.get("/")
def page() -> FileResponse:
    """The single page: upload, watch progress, list documents, search."""
    return FileResponse(STATIC_DIR / "index.html", headers=PAGE_HEADERS)
