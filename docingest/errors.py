"""One exception tree for everything the SDK raises about the service.

`DocingestError` carries the contract's `code` and `message` and the HTTP `status` (None
when no answer came). Its subclasses group the codes by what a caller does about them; a code
the SDK does not know still maps by its status, so a newer server's codes land in the right
branch."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from docingest.models import Job


class DocingestError(Exception):
    """The service refused a request, failed it, or could not be reached."""

    def __init__(
        self,
        code: str,
        message: str,
        *,
        status: int | None = None,
        retry_after: float | None = None,
    ) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.status = status
        self.retry_after = retry_after
        """Seconds the server asked to wait (`Retry-After`), when it said."""

    def __str__(self) -> str:
        where = f"HTTP {self.status}, " if self.status is not None else ""
        return f"{self.message} ({where}{self.code})"


class ConnectionProblem(DocingestError):
    """No answer: nothing listens there, it did not answer in time, or the connection broke."""


class InvalidRequest(DocingestError):
    """400/422: bad input (a body, a filter, metadata, an index name, an empty upload)."""


class Unauthorized(DocingestError):
    """401: the API key is missing or not valid."""


class Forbidden(DocingestError):
    """403: the API key may not use this index."""


class NotFound(DocingestError):
    """404: no such index, document, job, webhook or endpoint."""


class IndexNotFound(NotFound):
    pass


class DocumentNotFound(NotFound):
    pass


class JobNotFound(NotFound):
    pass


class Conflict(DocingestError):
    """409: the index exists with other settings, or a job is not in a state for this."""


class PayloadTooLarge(DocingestError):
    """413: the upload or document is over the server's limit."""


class UnsupportedFormat(DocingestError):
    """415: a format the service does not read."""


class RateLimited(DocingestError):
    """429: too many requests (retried by the client first, as `Retry-After` says)."""


class Unavailable(DocingestError):
    """503/507: a dependency is down, the store is busy, or staging is full (retried first)."""


class ServerError(DocingestError):
    """500 and any other status: the server failed; its log has the details."""


class JobFailed(DocingestError):
    """`wait()` saw the job end `failed` or `cancelled`; `job` is its last state."""

    def __init__(self, job: Job) -> None:
        error = job.error
        code = error.code if error is not None else job.status
        message = error.message if error is not None else f"The job ended {job.status}."
        super().__init__(code, f"job {job.job_id} ({job.document_id}): {message}")
        self.job = job


class WaitTimeout(DocingestError, TimeoutError):
    """`wait()` gave up before the job finished; `job` is the last state seen."""

    def __init__(self, job: Job, timeout: float) -> None:
        super().__init__(
            "wait_timeout",
            f"job {job.job_id} is still {job.status} after {timeout:g} s "
            f"(stage {job.stage or '-'}, progress {job.progress:.0%})",
        )
        self.job = job


_BY_CODE: dict[str, type[DocingestError]] = {
    "index_not_found": IndexNotFound,
    "document_not_found": DocumentNotFound,
    "job_not_found": JobNotFound,
}
_BY_STATUS: dict[int, type[DocingestError]] = {
    400: InvalidRequest,
    401: Unauthorized,
    403: Forbidden,
    404: NotFound,
    409: Conflict,
    413: PayloadTooLarge,
    415: UnsupportedFormat,
    422: InvalidRequest,
    429: RateLimited,
    503: Unavailable,
    507: Unavailable,
}


def error_for(
    status: int, code: str, message: str, *, retry_after: float | None = None, **_: Any
) -> DocingestError:
    """The exception for an error answer: by its code where one class names it, else by its
    HTTP status."""
    cls = _BY_CODE.get(code) or _BY_STATUS.get(status)
    if cls is None:
        cls = InvalidRequest if 400 <= status < 500 else ServerError
    return cls(code, message, status=status, retry_after=retry_after)
