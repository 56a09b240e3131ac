"""What a crawler reads in a page: its links, its canonical URL, and a sitemap's locations.

With the standard library's `html.parser` and a regular expression, in the scheduler's
process: both are pure Python over text whose size is bounded (`MAX_SCAN_BYTES`), no C
parser meets the page here (the page as a document is parsed by the job, in the limited
child), and a sitemap is read without an XML parser, so no entity expansion can happen.
"""

from __future__ import annotations

import re
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import urljoin, urlsplit, urlunsplit

MAX_SCAN_BYTES = 4 * 1024 * 1024
"""How much of a page or sitemap is read for links."""
MAX_LINKS = 5000
"""Links kept per page (or locations per sitemap)."""
_LOC = re.compile(r"<loc>\s*([^<\s]+)\s*</loc>", re.I)
_SITEMAP_INDEX = re.compile(r"<sitemapindex[\s>]", re.I)


def canonical(url: str) -> str | None:
    """`url` normalised: http(s) only, lower-case scheme and host, no default port, no
    fragment, "/" for an empty path; None for anything else."""
    try:
        parts = urlsplit(url.strip())
        port = parts.port
    except ValueError:
        return None
    if parts.scheme.lower() not in ("http", "https") or not parts.hostname:
        return None
    scheme = parts.scheme.lower()
    host = parts.hostname.lower()
    if ":" in host:
        host = f"[{host}]"
    default = 443 if scheme == "https" else 80
    netloc = host if port in (None, default) else f"{host}:{port}"
    return urlunsplit((scheme, netloc, parts.path or "/", parts.query, ""))


class _Links(HTMLParser):
    def __init__(self, base: str) -> None:
        super().__init__(convert_charrefs=True)
        self.base = base
        self.links: list[str] = []
        self.canonical: str | None = None
        self.nofollow = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        values = {name: value or "" for name, value in attrs}
        if tag == "base" and values.get("href"):
            self.base = urljoin(self.base, values["href"])
        elif tag == "a" and values.get("href") and len(self.links) < MAX_LINKS:
            if "nofollow" not in values.get("rel", "").lower():
                self.links.append(urljoin(self.base, values["href"]))
        elif tag == "link" and "canonical" in values.get("rel", "").lower() and values.get("href"):
            self.canonical = self.canonical or urljoin(self.base, values["href"])
        elif tag == "meta" and values.get("name", "").lower() == "robots":
            self.nofollow = "nofollow" in values.get("content", "").lower()


def page_links(path: Path, url: str) -> tuple[list[str], str | None]:
    """The page's followable links (canonical, in order, once each) and its canonical URL."""
    with path.open("rb") as handle:
        text = handle.read(MAX_SCAN_BYTES).decode("utf-8", errors="replace")
    parser = _Links(url)
    try:
        parser.feed(text)
        parser.close()
    except (AssertionError, ValueError):  # html.parser gives up on some broken markup
        pass
    links = [] if parser.nofollow else parser.links
    found = dict.fromkeys(link for link in map(canonical, links) if link is not None)
    return list(found), canonical(parser.canonical) if parser.canonical else None


def sitemap_locations(path: Path) -> tuple[list[str], bool]:
    """The `<loc>` URLs of a sitemap, and whether it is a sitemap index (of sitemaps)."""
    with path.open("rb") as handle:
        text = handle.read(MAX_SCAN_BYTES).decode("utf-8", errors="replace")
    locations = [loc for loc in map(canonical, _LOC.findall(text)[:MAX_LINKS]) if loc]
    return locations, bool(_SITEMAP_INDEX.search(text))


def is_html(content_type: str | None) -> bool:
    kind = (content_type or "").split(";", 1)[0].strip().lower()
    return kind in ("text/html", "application/xhtml+xml")
