"""EPUB: the spine's XHTML documents in order, through the HTML extractor, titled by the TOC.

Written here on lxml and the HTML extractor rather than with a library: the EPUB readers
for Python are AGPL (PyMuPDF), unmaintained or read the whole package their own way; an
EPUB is a ZIP (opened by the shared pre-scan, `zip_container`), one OPF file and XHTML.

1. `META-INF/container.xml` names the OPF package file; the OPF gives the metadata (title,
   creators, language, dates), the manifest and the spine (reading order).
2. The table of contents (the EPUB 3 navigation document, else the EPUB 2 NCX) maps
   `file#anchor` to chapter titles and their depth.
3. Each spine document is read once, even when the spine lists it again (a spine that loops
   cannot multiply the text), and goes through the HTML extractor after a heading with its
   TOC title is inserted where the TOC points, unless a heading is already there. Sections
   run across files: text at the top of a file stays under the previous file's heading.

XML is parsed with entities, DTDs and the network off (NCX files carry a DOCTYPE, so one is
not refused here). A package that encrypts its content documents (DRM) is
`encrypted_document`; font obfuscation, which encrypts only fonts, is not.
"""

from __future__ import annotations

import posixpath
import warnings
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any
from urllib.parse import unquote, urldefrag

import bs4
from bs4 import BeautifulSoup, Tag
from lxml import etree

from docingest.pipeline.document import Block, DocumentFormat, ExtractedDocument
from docingest.pipeline.errors import CorruptDocument, EncryptedDocument
from docingest.pipeline.extract.html import extract_html
from docingest.pipeline.extract.zip_container import SafeZip, ZipLimits

_CONTAINER = "{urn:oasis:names:tc:opendocument:xmlns:container}"
_OPF = "{http://www.idpf.org/2007/opf}"
_DC = "{http://purl.org/dc/elements/1.1/}"
_NCX = "{http://www.daisy.org/z3986/2005/ncx/}"
_XHTML = "{http://www.w3.org/1999/xhtml}"
_EPUB = "{http://www.idpf.org/2007/ops}"
_ENC = "{http://www.w3.org/2001/04/xmlenc#}"
_HTML_TYPES = frozenset(("application/xhtml+xml", "text/html", "application/xml"))
_HEADINGS = ("h1", "h2", "h3", "h4", "h5", "h6")
_MAX_LEVEL = 6
_Element = Any  # an lxml element


@dataclass
class _Package:
    """What the OPF says: metadata, the spine's document paths, and where the TOC is."""

    metadata: dict[str, str] = field(default_factory=dict)
    spine: list[str] = field(default_factory=list)
    media_types: dict[str, str] = field(default_factory=dict)
    nav: str | None = None
    ncx: str | None = None


def extract_epub(data: bytes, *, limits: ZipLimits) -> ExtractedDocument:
    """Extract the chapters of the EPUB in `data`, with title, author and language."""
    with SafeZip(data, label="EPUB", limits=limits) as book:
        opf_path = _rootfile(book)
        package = _read_opf(book, opf_path)
        _refuse_drm(book, package)
        toc = _table_of_contents(book, package)
        blocks: list[Block] = []
        for path in dict.fromkeys(package.spine):  # each document once, in first order
            if package.media_types.get(path) in _HTML_TYPES and book.has(path):
                blocks += _chapter_blocks(book.read(path), toc.get(path, []))
    meta = package.metadata
    document = ExtractedDocument(
        format=DocumentFormat.EPUB,
        blocks=blocks,
        title=meta.get("title"),
        author=meta.get("creator"),
        created=_date(meta.get("date")),
        modified=_date(meta.get("modified")),
        extra={"chapters": len(dict.fromkeys(package.spine))},
    )
    if language := meta.get("language"):
        document.extra["language"] = language
    return document


def _xml(blob: bytes, what: str) -> _Element:
    parser = etree.XMLParser(resolve_entities=False, no_network=True, load_dtd=False)
    try:
        return etree.fromstring(blob, parser)
    except etree.XMLSyntaxError as exc:
        raise CorruptDocument(f"The EPUB's {what} is malformed XML ({exc}).") from exc


def _rootfile(book: SafeZip) -> str:
    if not book.has("META-INF/container.xml"):
        raise CorruptDocument("The EPUB has no META-INF/container.xml, so its content is unknown.")
    container = _xml(book.read("META-INF/container.xml"), "container.xml")
    for rootfile in container.iter(_CONTAINER + "rootfile"):
        path = unquote(rootfile.get("full-path", ""))
        if path and book.has(path):
            return path
    raise CorruptDocument("The EPUB's container.xml names no package (OPF) file it holds.")


def _resolve(base: str, href: str) -> str:
    """The package path of `href` (relative to the file at `base`), fragment dropped."""
    target = unquote(urldefrag(href)[0])
    return posixpath.normpath(posixpath.join(posixpath.dirname(base), target)).lstrip("/")


def _read_opf(book: SafeZip, opf_path: str) -> _Package:
    opf = _xml(book.read(opf_path), "package file (OPF)")
    package = _Package()
    manifest: dict[str, str] = {}
    for item in opf.iterfind(f"{_OPF}manifest/{_OPF}item"):
        path = _resolve(opf_path, item.get("href", ""))
        manifest[item.get("id", "")] = path
        package.media_types[path] = item.get("media-type", "")
        if "nav" in item.get("properties", "").split():
            package.nav = path
    spine = opf.find(_OPF + "spine")
    if spine is None:
        raise CorruptDocument("The EPUB's package file has no spine, so no reading order.")
    package.spine = [manifest[ref] for ref in _idrefs(spine) if ref in manifest]
    if (ncx_id := spine.get("toc")) in manifest:
        package.ncx = manifest[ncx_id]
    package.metadata = _metadata(opf)
    return package


def _idrefs(spine: _Element) -> list[str]:
    return [ref.get("idref", "") for ref in spine.iterfind(_OPF + "itemref")]


def _metadata(opf: _Element) -> dict[str, str]:
    found: dict[str, str] = {}
    metadata = opf.find(_OPF + "metadata")
    if metadata is None:
        return found
    creators = [_text(node) for node in metadata.iterfind(_DC + "creator") if _text(node)]
    if creators:
        found["creator"] = ", ".join(creators)
    for name in ("title", "language", "date"):
        node = metadata.find(_DC + name)
        if node is not None and (text := _text(node)):
            found[name] = text
    for meta in metadata.iterfind(_OPF + "meta"):
        if meta.get("property") == "dcterms:modified" and (text := _text(meta)):
            found["modified"] = text
    return found


def _refuse_drm(book: SafeZip, package: _Package) -> None:
    """Encrypted content documents mean DRM; encrypted fonts alone are mere obfuscation."""
    if not book.has("META-INF/encryption.xml"):
        return
    encryption = _xml(book.read("META-INF/encryption.xml"), "encryption.xml")
    encrypted = {
        posixpath.normpath(unquote(ref.get("URI", ""))).lstrip("/")
        for ref in encryption.iter(_ENC + "CipherReference")
    }
    if encrypted & set(package.spine):
        raise EncryptedDocument(
            "The EPUB's chapters are encrypted (DRM); only DRM-free e-books can be read."
        )


def _table_of_contents(book: SafeZip, package: _Package) -> dict[str, list[tuple[str, str, int]]]:
    """Per document path, its TOC entries in order: (anchor id or "", title, depth 1..6)."""
    entries: list[tuple[str, str, int]] = []  # (href resolved with fragment, title, depth)
    if package.nav and book.has(package.nav):
        entries = _nav_entries(_xml(book.read(package.nav), "navigation document"), package.nav)
    elif package.ncx and book.has(package.ncx):
        entries = _ncx_entries(_xml(book.read(package.ncx), "table of contents (NCX)"), package.ncx)
    toc: dict[str, list[tuple[str, str, int]]] = {}
    for href, title, depth in entries:
        path, fragment = urldefrag(href)
        toc.setdefault(path, []).append((unquote(fragment), title, depth))
    return toc


def _nav_entries(nav_doc: _Element, base: str) -> list[tuple[str, str, int]]:
    tocs = [
        nav for nav in nav_doc.iter(_XHTML + "nav") if "toc" in nav.get(_EPUB + "type", "").split()
    ]
    entries: list[tuple[str, str, int]] = []
    if not tocs:
        return entries
    for anchor in tocs[0].iter(_XHTML + "a"):
        depth = sum(1 for node in anchor.iterancestors(_XHTML + "ol"))
        if (href := anchor.get("href")) and (title := _text(anchor)):
            entries.append((_with_fragment(base, href), title, min(depth, _MAX_LEVEL)))
    return entries


def _ncx_entries(ncx: _Element, base: str) -> list[tuple[str, str, int]]:
    entries: list[tuple[str, str, int]] = []
    for point in ncx.iter(_NCX + "navPoint"):
        depth = sum(1 for node in point.iterancestors(_NCX + "navPoint")) + 1
        label, content = point.find(f"{_NCX}navLabel/{_NCX}text"), point.find(_NCX + "content")
        if label is not None and content is not None and (title := _text(label)):
            href = _with_fragment(base, content.get("src", ""))
            entries.append((href, title, min(depth, _MAX_LEVEL)))
    return entries


def _with_fragment(base: str, href: str) -> str:
    path, fragment = urldefrag(href)
    resolved = _resolve(base, path) if path else base
    return f"{resolved}#{fragment}" if fragment else resolved


def _chapter_blocks(xhtml: bytes, entries: list[tuple[str, str, int]]) -> list[Block]:
    """The document's blocks, with a heading for each TOC entry not already at a heading."""
    if entries:
        xhtml = _with_toc_headings(xhtml, entries)
    return extract_html(xhtml, encoding=None).blocks


def _with_toc_headings(xhtml: bytes, entries: list[tuple[str, str, int]]) -> bytes:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", bs4.XMLParsedAsHTMLWarning)
        soup = BeautifulSoup(xhtml, "lxml")
    body = soup.body
    if body is None:
        return xhtml
    changed = False
    for fragment, title, depth in entries:
        target = soup.find(id=fragment) if fragment else body
        if not isinstance(target, Tag) or _at_heading(target):
            continue
        heading = soup.new_tag(f"h{depth}")
        heading.string = title
        if target is body:
            body.insert(0, heading)
        else:
            target.insert_before(heading)
        changed = True
    return soup.encode("utf-8") if changed else xhtml


def _at_heading(target: Tag) -> bool:
    """True when the TOC points at a heading, into one, or at a block opening with one."""
    if target.name in _HEADINGS or target.find_parent(_HEADINGS) is not None:
        return True
    first = next((child for child in target.children if isinstance(child, Tag)), None)
    if first is not None and first.name in _HEADINGS:
        return True
    following = target.find_next(True)  # an empty anchor just before the heading
    return (
        not target.get_text(strip=True)
        and isinstance(following, Tag)
        and (following.name in _HEADINGS)
    )


def _text(node: _Element) -> str:
    return " ".join("".join(node.itertext()).split())


def _date(value: str | None) -> datetime | None:
    if not value:
        return None
    try:
        moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)
