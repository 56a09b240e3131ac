"""Which files and URLs the MCP server may ingest, and fetching a URL without letting it
reach the deployment's own network.

A path must resolve (symlinks followed) inside an allowed folder. A URL must be http(s), start
with an allowed prefix, and every address its host resolves to must be public
(`docingest.common.addresses`, the guard every outbound fetch shares) unless private addresses
are allowed; the request then goes to the address that was checked (the host name kept for the
Host header and TLS), so a DNS answer that changes between the check and the connection cannot
redirect it. Redirects are followed by hand, each hop checked the same way.
"""

from __future__ import annotations

import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from urllib.parse import urljoin, urlsplit

import httpx

from docingest.common.addresses import (
    AddressNotAllowed,
    HostNotResolved,
    resolve,
    resolve_public,
)

MAX_REDIRECTS = 5


class NotAllowed(Exception):
    """The operator has not allowed this path or URL (the message says why)."""


@dataclass(frozen=True)
class FetchPolicy:
    allow_paths: Sequence[Path] = ()
    """Folders whose files may be ingested (none: no local file may)."""
    allow_urls: Sequence[str] = ()
    """URL prefixes that may be fetched, e.g. `https://docs.example.com/` (none: no URL)."""
    allow_private: bool = False
    """Whether a URL may resolve to a loopback, private, link-local or reserved address."""
    max_bytes: int = 100 * 1024 * 1024
    timeout: float = 30.0
    roots: list[Path] = field(init=False, default_factory=list)

    def __post_init__(self) -> None:
        self.roots.extend(Path(path).resolve() for path in self.allow_paths)

    def check_path(self, raw: str) -> Path:
        path = Path(raw).expanduser().resolve()
        if not any(path.is_relative_to(root) for root in self.roots):
            raise NotAllowed(f"{raw} is outside the folders this server may read")
        if not path.is_file():
            raise NotAllowed(f"{raw} is not a file")
        return path

    def check_url(self, url: str) -> tuple[str, str]:
        """The URL's host and the checked address to connect to, or `NotAllowed`."""
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise NotAllowed(f"{url} is not an http(s) URL")
        if not any(url.startswith(prefix) for prefix in self.allow_urls):
            raise NotAllowed(f"{url} is not under a URL prefix this server may fetch")
        host = parts.hostname
        try:
            check = resolve if self.allow_private else resolve_public
            addresses = check(host, parts.port)
        except HostNotResolved as exc:
            raise NotAllowed(f"{host} does not resolve") from exc
        except AddressNotAllowed as exc:
            raise NotAllowed(
                f"{host} resolves to {exc.address}, a non-public address ({exc.reason})"
            ) from exc
        return host, addresses[0]

    def fetch(self, url: str) -> tuple[Path, str]:
        """Download `url` into a temporary file (the caller deletes it); its name for the upload."""
        with httpx.Client(timeout=self.timeout, follow_redirects=False) as http:
            for _ in range(MAX_REDIRECTS + 1):
                host, address = self.check_url(url)
                parts = urlsplit(url)
                literal = f"[{address}]" if ":" in address else address
                pinned = parts._replace(netloc=f"{literal}:{parts.port}" if parts.port else literal)
                request = http.build_request(
                    "GET",
                    pinned.geturl(),
                    headers={"Host": parts.netloc.rsplit("@", 1)[-1]},
                    extensions={"sni_hostname": host},
                )
                response = http.send(request, stream=True)
                try:
                    if response.is_redirect:
                        url = urljoin(url, response.headers.get("location", ""))
                        continue
                    response.raise_for_status()
                    return self._save(response), PurePosixPath(parts.path).name or host
                finally:
                    response.close()
        raise NotAllowed(f"{url}: more than {MAX_REDIRECTS} redirects")

    def _save(self, response: httpx.Response) -> Path:
        with tempfile.NamedTemporaryFile(prefix="docingest-mcp-", delete=False) as out:
            size = 0
            for chunk in response.iter_bytes():
                size += len(chunk)
                if size > self.max_bytes:
                    out.close()
                    Path(out.name).unlink(missing_ok=True)
                    raise NotAllowed(f"the download is larger than {self.max_bytes} bytes")
                out.write(chunk)
        return Path(out.name)
