"""docingest: the Python SDK (`Client`, `AsyncClient`) and the `docingest` command line.

    import docingest
    client = docingest.Client()                    # DOCINGEST_URL, DOCINGEST_API_KEY
    client.ingest("handbook", "report.pdf")        # upload and wait for the job
    for hit in client.search("handbook", "Which formats can it read?").results:
        print(hit.score, hit.document_id, hit.headings, hit.best_text)

`verify_signature` checks a webhook delivery (`docingest.webhooks`, standard library only).
Importing this package loads the SDK only (httpx and pydantic), never the service.
"""

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
