"""A small website served on loopback for the `web` source's tests: pages that link to each
other, a sitemap, robots.txt, redirects, validators answered with 304, a slow page, a link
loop, an off-scope link, a page that changes between runs and one that disappears, and for
the hostile cases a 500, a redirect loop, an endless calendar, a huge page, a page that never
answers and a file of a type no parser knows.

Pages are a dict the test may change (`site.pages[path] = (content type, body)`); every
request is counted by path in `site.hits`, and 304s in `site.not_modified`.
"""

from __future__ import annotations

import hashlib
import threading
import time
from collections import Counter
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

HTML = "text/html; charset=utf-8"


def page(title: str, *links: str, body: str = "", head: str = "") -> tuple[str, bytes]:
    anchors = "".join(f'<p><a href="{link}">{link}</a></p>' for link in links)
    body = body or f"{title} is a page of the test site about llamas."
    text = (
        f"<html><head><title>{title}</title>{head}</head><body><h1>{title}</h1>"
        f"<p>{body}</p>{anchors}</body></html>"
    )
    return HTML, text.encode()


class TestSite:
    __test__ = False

    def __init__(self) -> None:
        self.pages: dict[str, tuple[str, bytes]] = {}
        self.redirects: dict[str, str] = {}
        self.slow: dict[str, float] = {}
        self.hang: set[str] = set()
        self.status: dict[str, int] = {}
        self.hits: Counter[str] = Counter()
        self.not_modified: Counter[str] = Counter()
        self.robots = "User-agent: *\nDisallow: /private/\n"
        self.huge_bytes = 0
        self.calendar = False
        self.on_request: Callable[[str], object] | None = None
        """Called with each request's path as it arrives."""
        self._lock = threading.Lock()
        self._release = threading.Event()
        site = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                site._answer(self)

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        threading.Thread(target=self._server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self._release.set()
        self._server.shutdown()
        self._server.server_close()

    def __enter__(self) -> TestSite:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def _answer(self, request: BaseHTTPRequestHandler) -> None:
        path = request.path.split("?", 1)[0]
        with self._lock:
            self.hits[path] += 1
            if self.on_request is not None:
                self.on_request(path)
        if path in self.hang:
            self._release.wait(600)
            return
        if path in self.slow:
            time.sleep(self.slow[path])
        if path == "/robots.txt":
            return _send(request, 200, "text/plain", self.robots.encode())
        if path in self.redirects:
            request.send_response(301)
            request.send_header("Location", self.redirects[path])
            request.send_header("Content-Length", "0")
            request.end_headers()
            return None
        if path in self.status:
            return _send(request, self.status[path], "text/plain", b"no")
        if self.calendar and path.startswith("/calendar/"):
            day = int(path.rsplit("/", 1)[1])
            return _send(request, 200, *page(f"Day {day}", f"/calendar/{day + 1}"))
        if path == "/huge.html" and self.huge_bytes:
            request.send_response(200)
            request.send_header("Content-Type", HTML)
            request.end_headers()  # no Content-Length: the size shows only while reading
            chunk = b"<p>" + b"x" * 65_536 + b"</p>"
            try:
                for _ in range(self.huge_bytes // len(chunk) + 1):
                    request.wfile.write(chunk)
            except OSError:
                pass  # the reader gave up, as it should
            return None
        found = self.pages.get(path)
        if found is None:
            return _send(request, 404, "text/plain", b"not found")
        content_type, body = found
        etag = '"' + hashlib.sha256(body).hexdigest()[:16] + '"'
        if request.headers.get("If-None-Match") == etag:
            with self._lock:
                self.not_modified[path] += 1
            request.send_response(304)
            request.send_header("ETag", etag)
            request.end_headers()
            return None
        return _send(request, 200, content_type, body, etag=etag)


def _send(
    request: BaseHTTPRequestHandler,
    status: int,
    content_type: str,
    body: bytes,
    *,
    etag: str | None = None,
) -> None:
    request.send_response(status)
    request.send_header("Content-Type", content_type)
    request.send_header("Content-Length", str(len(body)))
    if etag:
        request.send_header("ETag", etag)
    request.end_headers()
    request.wfile.write(body)
