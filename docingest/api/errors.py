"""The one place that knows HTTP statuses: docingest errors → the contract's error JSON.

Every error response is `{"error": {"code", "message"}}`; a server error never shows a
traceback (it is logged with the request path instead).
"""

from __future__ import annotations

import json
import logging

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException
from uvicorn.protocols.http.auto import AutoHTTPProtocol

from docingest.pipeline.errors import (
    ApiKeyNotFound,
    CursorExpired,
    DocumentIngesting,
    DocumentNotFound,
    DocumentTooLarge,
    EmptyDocument,
    Forbidden,
    IndexConflict,
    IndexNotFound,
    IngestError,
    InvalidEmbedding,
    InvalidIndexName,
    InvalidRerank,
    InvalidUpload,
    JobNotFound,
    JobStateConflict,
    RunNotFound,
    RunStateConflict,
    SourceNotFound,
    StagingFull,
    StoreLocked,
    StoreNotHere,
    SyncInProgress,
    TransientError,
    Unauthorized,
    UnsupportedFormat,
    UploadTooLarge,
    WebhookNotFound,
)

_UNREAD_BODY = (UploadTooLarge, InvalidUpload, StagingFull)
"""Errors raised before the body was read whole: close the connection after answering, so a
client cannot go on streaming a huge body into the server."""

log = logging.getLogger(__name__)

STATUS_BY_ERROR: dict[type[IngestError], int] = {
    EmptyDocument: 400,
    Unauthorized: 401,
    Forbidden: 403,
    IndexNotFound: 404,
    DocumentNotFound: 404,
    JobNotFound: 404,
    WebhookNotFound: 404,
    SourceNotFound: 404,
    RunNotFound: 404,
    ApiKeyNotFound: 404,
    IndexConflict: 409,
    JobStateConflict: 409,
    SyncInProgress: 409,
    RunStateConflict: 409,
    CursorExpired: 409,
    DocumentIngesting: 409,
    UploadTooLarge: 413,
    InvalidUpload: 400,
    DocumentTooLarge: 413,
    UnsupportedFormat: 415,
    InvalidIndexName: 422,
    InvalidEmbedding: 422,  # and UnknownProvider
    InvalidRerank: 422,
    StagingFull: 507,
    StoreLocked: 503,
    StoreNotHere: 503,
    TransientError: 503,
}
"""Status per error class; a subclass inherits its nearest listed ancestor's, else 400."""

_HTTP_CODES = {
    400: "invalid_request",  # a body FastAPI cannot parse (JSON nested 100,000 deep)
    404: "not_found",
    405: "method_not_allowed",
    413: "upload_too_large",
}


def status_for(error: IngestError) -> int:
    for cls in type(error).__mro__:
        if cls in STATUS_BY_ERROR:
            return STATUS_BY_ERROR[cls]
    return 400


def error_body(code: str, message: str) -> dict[str, dict[str, str]]:
    return {"error": {"code": code, "message": message}}


def install_error_handlers(app: FastAPI) -> None:
    """Map every exception a request can raise to the contract's error shape."""

    @app.exception_handler(IngestError)
    async def ingest_error(request: Request, exc: IngestError) -> JSONResponse:
        status = status_for(exc)
        headers = {"WWW-Authenticate": "Bearer"} if status == 401 else None
        if status in (503, 507):
            headers = {"Retry-After": "5" if status == 503 else "60"}
        if isinstance(exc, _UNREAD_BODY):
            headers = (headers or {}) | {"Connection": "close"}
        return JSONResponse(error_body(exc.code, exc.message), status_code=status, headers=headers)

    @app.exception_handler(RequestValidationError)
    async def invalid_request(request: Request, exc: RequestValidationError) -> JSONResponse:
        problems = []
        for error in exc.errors()[:5]:
            where = ".".join(str(part) for part in error.get("loc", ()) if part != "body")
            problems.append(f"{where}: {error.get('msg', 'invalid')}" if where else error["msg"])
        message = "Invalid request: " + "; ".join(problems) + "."
        return JSONResponse(error_body("validation_error", message), status_code=422)

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        code = _HTTP_CODES.get(exc.status_code, f"http_{exc.status_code}")
        message = exc.detail if isinstance(exc.detail, str) else "The request failed."
        if exc.status_code == 404:
            message = f"No such endpoint: {request.method} {request.url.path}."
        return JSONResponse(
            error_body(code, message), status_code=exc.status_code, headers=exc.headers
        )

    @app.exception_handler(Exception)
    async def unexpected(request: Request, exc: Exception) -> JSONResponse:
        log.error("unhandled error on %s %s", request.method, request.url.path, exc_info=exc)
        message = "An internal error occurred; the server log has the details."
        return JSONResponse(error_body("internal_error", message), status_code=500)


UNREADABLE_REQUEST = error_body(
    "invalid_request",
    "The request could not be read as HTTP: its request line or headers are malformed or too "
    "long (about 64 KB in all). Send a long search query in the body of a POST.",
)
"""What a client gets for a request uvicorn's parser refuses before the app sees it."""


class JsonErrorProtocol(AutoHTTPProtocol):  # type: ignore[misc,valid-type]
    """uvicorn's HTTP protocol, answering a request it cannot parse (a 100 KB query string)
    with the contract's error shape instead of its own plain text."""

    def send_400_response(self, msg: str) -> None:
        body = json.dumps(UNREADABLE_REQUEST).encode()
        head = [b"HTTP/1.1 400 Bad Request\r\n"]
        head += [
            name + b": " + value + b"\r\n" for name, value in self.server_state.default_headers
        ]
        head += [
            b"content-type: application/json\r\n",
            b"content-length: " + str(len(body)).encode("ascii") + b"\r\n",
            b"connection: close\r\n\r\n",
        ]
        self.transport.write(b"".join(head) + body)
        self.transport.close()
