"""The `web` source: a website crawled from start URLs and/or sitemaps.

Breadth first from the start URLs (depth 0) and the sitemaps' locations, within a scope (the
start URLs' origins, or their path prefixes), obeying robots.txt (`urllib.robotparser`, fed
through the guarded fetch), to `max_pages` pages and `max_depth` links deep, waiting
`delay_seconds` (or robots.txt's longer `Crawl-delay`) from the end of one request to the
next. Each page is asked for conditionally (the validators kept from the last run: `If-None-Match`,
`If-Modified-Since`), so an unchanged page costs a 304, and its links are then the ones kept
with it. A page's document id is its canonical URL (its `<link rel=canonical>` when that is
in scope, else the URL that answered, normalised), so one page is one document however it is
reached; documents it links to (PDF, DOCX, ...) within scope are items too. A page that
fails counts as failed and keeps its document; one that answers 404 or 410, or is no longer
reached, is gone (deleted when the source prunes).
"""

from __future__ import annotations

import logging
import time
from collections import deque
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path, PurePosixPath
from typing import Any, Literal
from urllib.parse import urlsplit
from urllib.robotparser import RobotFileParser

from pydantic import BaseModel, ConfigDict, Field

from docingest.pipeline.errors import SourceUnreadable
from docingest.pipeline.settings import Settings
from docingest.pipeline.sources.base import (
    Fetched,
    Found,
    Item,
    ItemFailed,
    Known,
    SourceType,
    max_item_bytes,
)
from docingest.pipeline.sources.targets import check_source_url
from docingest.pipeline.sources.web_fetch import USER_AGENT, Unreachable, get
from docingest.pipeline.sources.web_links import canonical, is_html, page_links, sitemap_locations

log = logging.getLogger(__name__)

MAX_START_URLS = 100
ROBOTS_MAX_BYTES = 512 * 1024
SITEMAP_MAX_BYTES = 50 * 1024 * 1024
"""The sitemap protocol's own limit on one file."""
GONE = (404, 410)
MAX_CRAWL_DELAY = 60.0
"""The longest wait between two requests a robots.txt `Crawl-delay` may ask for."""


class WebConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    start_urls: list[str] = Field(default_factory=list, max_length=MAX_START_URLS)
    sitemaps: list[str] = Field(default_factory=list, max_length=MAX_START_URLS)
    scope: Literal["origin", "prefix"] = "origin"
    max_pages: int = Field(default=1000, ge=1, le=1_000_000)
    max_depth: int = Field(default=5, ge=0, le=100)
    delay_seconds: float = Field(default=1.0, ge=0, le=60)


def check(config: WebConfig, settings: Settings) -> None:
    from docingest.pipeline.errors import InvalidSource

    if not config.start_urls and not config.sitemaps:
        raise InvalidSource("A web source needs start_urls, sitemaps or both.")
    for url in [*config.start_urls, *config.sitemaps]:
        if canonical(url) is None:
            raise InvalidSource(f"{url!r} is not an http(s) URL.")
        check_source_url(url, settings, what="start URL")


class _Scope:
    def __init__(self, config: WebConfig) -> None:
        roots = [canonical(url) or url for url in config.start_urls or config.sitemaps]
        self._origins = {_origin(url) for url in roots}
        self._prefixes = [_prefix(url) for url in roots] if config.scope == "prefix" else None

    def __call__(self, url: str) -> bool:
        if _origin(url) not in self._origins:
            return False
        return self._prefixes is None or any(url.startswith(p) for p in self._prefixes)


def _origin(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}"


def _prefix(url: str) -> str:
    parts = urlsplit(url)
    directory = parts.path if parts.path.endswith("/") else parts.path.rsplit("/", 1)[0] + "/"
    return f"{parts.scheme}://{parts.netloc}{directory}"


class WebReader:
    def __init__(self, config: WebConfig, settings: Settings) -> None:
        self._config = config
        self._settings = settings
        self._limit = max_item_bytes(settings)
        self._in_scope = _Scope(config)
        self._robots: dict[str, RobotFileParser | None] = {}
        self._last_request = 0.0
        self._delay = config.delay_seconds
        self._answered = 0
        self._unreachable = 0
        self._read = 0
        """Pages read (200 or 304): a walk that read none while some failed fails the run."""

    def walk(self, known: Known, staging: Callable[[], Path]) -> Iterator[Found]:
        config = self._config
        queue: deque[tuple[str, int]] = deque()
        queued: set[str] = set()
        for url in config.start_urls:
            start = canonical(url)
            if start and start not in queued:
                queue.append((start, 0))
                queued.add(start)
        for url in self._sitemap_urls(staging):
            if url not in queued:
                queue.append((url, 0))
                queued.add(url)
        pages = 0
        documents: set[str] = set()
        while queue and pages < config.max_pages:
            url, depth = queue.popleft()
            if not self._allowed(url, staging):
                continue
            self._delay = max(self._config.delay_seconds, self._crawl_delay(url))
            pages += 1
            found, links = self._page(url, known, staging)
            if found is not None and found.item.document_id in documents:
                _drop(found)  # another URL of a page already brought (its canonical one)
                found = None
            if found is not None:
                documents.add(found.item.document_id)
                if found.failure is None:
                    self._read += 1
                yield found
            if depth < config.max_depth:
                for link in links:
                    if link not in queued and self._in_scope(link):
                        queued.add(link)
                        queue.append((link, depth + 1))
        if self._read == 0 and self._answered == 0 and self._unreachable > 0:
            raise SourceUnreadable("source_unreachable", "No page of the site could be reached.")
        if self._read == 0 and pages > 0:
            raise SourceUnreadable("source_error", "No page of the site could be read.")

    def _page(
        self, url: str, known: Known, staging: Callable[[], Path]
    ) -> tuple[Found | None, list[str]]:
        previous = known.get(url)
        headers: dict[str, str] = {}
        if previous is not None:
            if previous.get("etag"):
                headers["If-None-Match"] = str(previous["etag"])
            if previous.get("last_modified"):
                headers["If-Modified-Since"] = str(previous["last_modified"])
        destination = staging()
        self._wait_politely()
        try:
            answer = get(
                url,
                settings=self._settings,
                destination=destination,
                headers=headers,
                max_bytes=self._limit,
                in_scope=self._in_scope,
            )
        except Unreachable as exc:
            self._unreachable += 1
            return _failed(url, exc), _kept_links(previous)
        except ItemFailed as exc:
            self._answered += 1
            return _failed(url, exc), _kept_links(previous)
        finally:
            # The delay runs from the end of this request, so the site sees at least the
            # delay between two requests whatever the network's jitter.
            self._last_request = time.monotonic()
        self._answered += 1
        final = canonical(answer.url) or url
        if answer.status == 304 and previous is not None:
            item = _item(
                url, str(previous.get("fp", "")), previous, answer.etag, answer.last_modified
            )
            return Found(item, unchanged=True), _kept_links(previous)
        if answer.status in GONE:
            return None, []
        if answer.status != 200 or answer.path is None:
            failure = ItemFailed("source_error", f"{url} answered HTTP {answer.status}.")
            return _failed(url, failure), _kept_links(previous)
        links: list[str] = []
        document_id = final
        if is_html(answer.content_type):
            links, declared = page_links(answer.path, final)
            if declared is not None and self._in_scope(declared):
                document_id = declared
        extra = {
            "etag": answer.etag,
            "last_modified": answer.last_modified,
            "links": links,
        }
        item = Item(
            document_id=document_id,
            uri=final,
            fingerprint=f"sha256:{answer.sha256}",
            filename=_filename(final),
            etag=answer.etag,
            last_modified=answer.last_modified,
            size=answer.size,
            extra={key: value for key, value in extra.items() if value},
        )
        fetched = Fetched(answer.size, answer.sha256 or "", answer.content_type)
        return Found(item, staged=answer.path, fetched=fetched), links

    def _sitemap_urls(self, staging: Callable[[], Path]) -> list[str]:
        found: list[str] = []
        pending = deque(url for url in map(canonical, self._config.sitemaps) if url)
        read = 0
        while pending and read < 50:  # a sitemap index of sitemaps, bounded
            sitemap = pending.popleft()
            read += 1
            destination = staging()
            try:
                answer = get(
                    sitemap,
                    settings=self._settings,
                    destination=destination,
                    max_bytes=SITEMAP_MAX_BYTES,
                )
                self._answered += 1
            except Unreachable:
                self._unreachable += 1
                continue
            except ItemFailed as exc:
                log.warning("sitemap %s: %s", sitemap, exc.message)
                continue
            if answer.path is None:
                continue
            try:
                locations, is_index = sitemap_locations(answer.path)
            finally:
                answer.path.unlink(missing_ok=True)
            if is_index:
                pending.extend(locations)
            else:
                found.extend(url for url in locations if self._in_scope(url))
        return found

    def _allowed(self, url: str, staging: Callable[[], Path]) -> bool:
        origin = _origin(url)
        if origin not in self._robots:
            self._robots[origin] = self._read_robots(origin, staging)
        robots = self._robots[origin]
        return robots is None or robots.can_fetch(USER_AGENT, url)

    def _read_robots(self, origin: str, staging: Callable[[], Path]) -> RobotFileParser | None:
        destination = staging()
        try:
            answer = get(
                f"{origin}/robots.txt",
                settings=self._settings,
                destination=destination,
                max_bytes=ROBOTS_MAX_BYTES,
            )
        except ItemFailed:
            return None  # no robots.txt that can be read: everything is allowed
        parser = RobotFileParser()
        if answer.status in (401, 403):
            parser.parse(["User-agent: *", "Disallow: /"])  # RFC 9309: as if all were disallowed
            return parser
        if answer.path is None:
            return None
        try:
            lines = answer.path.read_text(encoding="utf-8", errors="replace").splitlines()
        finally:
            answer.path.unlink(missing_ok=True)
        parser.parse(lines)
        return parser

    def _crawl_delay(self, url: str) -> float:
        """robots.txt's `Crawl-delay` for us, capped at `MAX_CRAWL_DELAY` (0 without one)."""
        robots = self._robots.get(_origin(url))
        delay = robots.crawl_delay(USER_AGENT) if robots is not None else None
        return min(float(delay or 0), MAX_CRAWL_DELAY)

    def _wait_politely(self) -> None:
        """Sleep until the delay has passed since the previous request ended."""
        wait = self._last_request + self._delay - time.monotonic()
        if wait > 0:
            time.sleep(wait)

    def fetch(self, item: Item, destination: Path) -> Fetched:
        raise ItemFailed("source_error", f"{item.uri} was not read by the walk.")

    def close(self) -> None:
        pass


def _kept_links(previous: Mapping[str, Any] | None) -> list[str]:
    links = (previous or {}).get("links") or []
    return [str(link) for link in links]


def _item(
    url: str,
    fingerprint: str,
    previous: Mapping[str, Any] | None,
    etag: str | None,
    last_modified: str | None,
) -> Item:
    kept = previous or {}
    etag = etag or kept.get("etag")
    last_modified = last_modified or kept.get("last_modified")
    extra = {"etag": etag, "last_modified": last_modified, "links": _kept_links(previous)}
    return Item(
        document_id=url,
        uri=url,
        fingerprint=fingerprint,
        filename=_filename(url),
        etag=etag,
        last_modified=last_modified,
        extra={key: value for key, value in extra.items() if value},
    )


def _failed(url: str, failure: ItemFailed) -> Found:
    return Found(
        Item(document_id=url, uri=url, fingerprint="", filename=_filename(url)), failure=failure
    )


def _drop(found: Found) -> None:
    if found.staged is not None:
        found.staged.unlink(missing_ok=True)


def _filename(url: str) -> str:
    name = PurePosixPath(urlsplit(url).path).name
    return name or "index.html"


WEB = SourceType(name="web", config=WebConfig, secrets=frozenset(), check=check, open=WebReader)
