"""docingest: the Python SDK (`Client`, `AsyncClient`) and the `docingest` command line.

    import docingest
    client = docingest.Client()                    # DOCINGEST_URL, DOCINGEST_API_KEY
    client.ingest("handbook", "report.pdf")        # upload and wait for the job
    for hit in client.search("handbook", "Which formats can it read?").results:
        print(hit.score, hit.document_id, hit.headings, hit.best_text)

`verify_signature` checks a webhook delivery (`docingest.webhooks`, standard library only).
Importing this package loads nothing until a name is used (PEP 562): `docingest.Client` loads
the SDK (httpx and pydantic), never the service, and the service's own modules
(`docingest.pipeline`, `docingest.api`, `docingest.workers`) never load the SDK.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from docingest.common.lazy import lazy_exports

if TYPE_CHECKING:
    from docingest._async_client import AsyncClient
    from docingest._client import Client
    from docingest._core import RetryPolicy
    from docingest.errors import (
        Conflict,
        ConnectionProblem,
        DocingestError,
        DocumentNotFound,
        Forbidden,
        IndexNotFound,
        InvalidRequest,
        JobFailed,
        JobNotFound,
        NotFound,
        PayloadTooLarge,
        RateLimited,
        ServerError,
        Unauthorized,
        Unavailable,
        UnsupportedFormat,
        WaitTimeout,
    )
    from docingest.webhooks import InvalidSignature, verify_signature

_EXPORTS = {  # name → the module that defines it (a test keeps it equal to __all__)
    "AsyncClient": "docingest._async_client",
    "Client": "docingest._client",
    "Conflict": "docingest.errors",
    "ConnectionProblem": "docingest.errors",
    "DocingestError": "docingest.errors",
    "DocumentNotFound": "docingest.errors",
    "Forbidden": "docingest.errors",
    "IndexNotFound": "docingest.errors",
    "InvalidRequest": "docingest.errors",
    "InvalidSignature": "docingest.webhooks",
    "JobFailed": "docingest.errors",
    "JobNotFound": "docingest.errors",
    "NotFound": "docingest.errors",
    "PayloadTooLarge": "docingest.errors",
    "RateLimited": "docingest.errors",
    "RetryPolicy": "docingest._core",
    "ServerError": "docingest.errors",
    "Unauthorized": "docingest.errors",
    "Unavailable": "docingest.errors",
    "UnsupportedFormat": "docingest.errors",
    "WaitTimeout": "docingest.errors",
    "verify_signature": "docingest.webhooks",
}

__all__ = [
    "AsyncClient",
    "Client",
    "ConnectionProblem",
    "Conflict",
    "DocingestError",
    "DocumentNotFound",
    "Forbidden",
    "IndexNotFound",
    "InvalidRequest",
    "InvalidSignature",
    "JobFailed",
    "JobNotFound",
    "NotFound",
    "PayloadTooLarge",
    "RateLimited",
    "RetryPolicy",
    "ServerError",
    "Unauthorized",
    "Unavailable",
    "UnsupportedFormat",
    "WaitTimeout",
    "verify_signature",
]


__getattr__, __dir__ = lazy_exports("docingest", _EXPORTS, globals())
