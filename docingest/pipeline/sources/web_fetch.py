"""One GET of a web source: every hop checked by the sources' address rule and connected to
the address checked (as webhook deliveries are), redirects followed by hand within a bound,
the body streamed to a file under a size limit and a deadline.

`http.client` rather than httpx for the reason the webhook sender gives: it connects where it
is told, so a host name is resolved once, by the check, and never again (DNS rebinding gains
nothing), and it follows no redirect, reads no proxy from the environment on its own.
"""

from __future__ import annotations

import hashlib
import http.client
import time
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urljoin, urlsplit

from docingest.pipeline.errors import InvalidSource
from docingest.pipeline.settings import Settings
from docingest.pipeline.sources.base import HASH_CHUNK, ItemFailed
from docingest.pipeline.sources.targets import check_source_url
from docingest.pipeline.webhooks.sender import pinned_connection

USER_AGENT = "docingest-sources/1 (+https://github.com/docingest)"
MAX_REDIRECTS = 5


class Unreachable(ItemFailed):
    """No answer at all (refused, reset, timed out): `source_unreachable`."""

    def __init__(self, message: str) -> None:
        super().__init__("source_unreachable", message)


@dataclass(frozen=True, slots=True)
class Answer:
    url: str
    """The URL that answered (after redirects)."""
    status: int
    content_type: str | None
    etag: str | None
    last_modified: str | None
    size: int = 0
    sha256: str | None = None
    path: Path | None = None
    """The body, when `status` is 200."""


def get(
    url: str,
    *,
    settings: Settings,
    destination: Path,
    headers: dict[str, str] | None = None,
    max_bytes: int,
    in_scope: object = None,
) -> Answer:
    """GET `url`, following up to `MAX_REDIRECTS` redirects (each hop checked, and in scope
    when `in_scope(url)` is given); the body of a 200 goes to `destination`. Raises
    `ItemFailed` (`too_many_redirects`, `document_too_large`, `timeout`, `invalid_source` for
    a hop the address rule refuses) or `Unreachable`."""
    timeout = settings.source_request_timeout_seconds
    seen: set[str] = set()
    for _ in range(MAX_REDIRECTS + 1):
        if url in seen:
            raise ItemFailed("too_many_redirects", f"{url} redirects in a loop.")
        seen.add(url)
        try:
            target = check_source_url(url, settings, what="page URL")
        except InvalidSource as exc:
            raise ItemFailed(exc.code, exc.message) from exc
        parts = urlsplit(url)
        path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        request = {"Host": parts.netloc, "User-Agent": USER_AGENT, **(headers or {})}
        connection = pinned_connection(target, timeout)
        deadline = time.monotonic() + 4 * timeout
        try:
            try:
                connection.request("GET", path, headers=request)
                response = connection.getresponse()
            except TimeoutError as exc:
                raise Unreachable(f"{url} did not answer within {timeout:g} s.") from exc
            except (OSError, http.client.HTTPException) as exc:
                raise Unreachable(f"{url} cannot be reached: {type(exc).__name__}.") from exc
            status = response.status
            if status in (301, 302, 303, 307, 308) and response.getheader("Location"):
                url = urljoin(url, response.getheader("Location", ""))
                url = url.split("#", 1)[0]
                if callable(in_scope) and not in_scope(url):
                    raise ItemFailed("out_of_scope", f"A redirect leaves the scope: {url}.")
                continue
            answer = Answer(
                url=url,
                status=status,
                content_type=response.getheader("Content-Type"),
                etag=response.getheader("ETag"),
                last_modified=response.getheader("Last-Modified"),
            )
            if status != 200:
                return answer
            declared = response.getheader("Content-Length")
            if declared and declared.isdigit() and int(declared) > max_bytes:
                raise ItemFailed(
                    "document_too_large", f"{url} is {declared} bytes, over {max_bytes}."
                )
            size, digest = _read(response, destination, max_bytes=max_bytes, deadline=deadline)
            return Answer(
                url=answer.url,
                status=200,
                content_type=answer.content_type,
                etag=answer.etag,
                last_modified=answer.last_modified,
                size=size,
                sha256=digest,
                path=destination,
            )
        finally:
            connection.close()
    raise ItemFailed("too_many_redirects", f"{url}: more than {MAX_REDIRECTS} redirects.")


def _read(
    response: http.client.HTTPResponse, destination: Path, *, max_bytes: int, deadline: float
) -> tuple[int, str]:
    digest = hashlib.sha256()
    size = 0
    try:
        with destination.open("wb") as out:
            while True:
                try:
                    chunk = response.read1(HASH_CHUNK)
                except TimeoutError as exc:
                    raise ItemFailed("timeout", "The page stopped sending.") from exc
                except (OSError, http.client.HTTPException) as exc:
                    raise ItemFailed("source_error", f"The page broke off: {exc}.") from exc
                if not chunk:
                    break
                size += len(chunk)
                if size > max_bytes:
                    raise ItemFailed("document_too_large", f"The page is over {max_bytes} bytes.")
                if time.monotonic() > deadline:
                    raise ItemFailed("timeout", "The page took too long to send.")
                digest.update(chunk)
                out.write(chunk)
    except BaseException:
        destination.unlink(missing_ok=True)
        raise
    return size, digest.hexdigest()
