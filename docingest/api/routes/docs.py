"""`/openapi.json`, `/docs` and `/redoc`: the schema and its two viewers, behind the API keys.

With keys configured they answer 401 without one, as every endpoint of the contract does: the
schema lists every route and parameter, which a platform engineer expects to stay private with
the data. Without keys they are open, like everything else. A browser cannot send a Bearer key
on navigation, so with keys the viewers are for a proxy that adds one; `curl -H
"Authorization: Bearer $KEY" .../openapi.json` reads the schema.
"""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.openapi.docs import get_redoc_html, get_swagger_ui_html
from fastapi.responses import HTMLResponse, JSONResponse

from docingest.api.deps import CallerDep

OPENAPI_URL = "/openapi.json"

router = APIRouter(include_in_schema=False)


@router.get(OPENAPI_URL)
def openapi(request: Request, _caller: CallerDep) -> JSONResponse:
    return JSONResponse(request.app.openapi())


@router.get("/docs")
def swagger_ui(request: Request, _caller: CallerDep) -> HTMLResponse:
    return get_swagger_ui_html(openapi_url=OPENAPI_URL, title=f"{request.app.title} - Swagger UI")


@router.get("/redoc")
def redoc(request: Request, _caller: CallerDep) -> HTMLResponse:
    return get_redoc_html(openapi_url=OPENAPI_URL, title=f"{request.app.title} - ReDoc")
