"""HTML extraction: decode as a browser would, drop page chrome, walk the main content to blocks.

Decoding follows the WHATWG encoding standard: a BOM, then a `<meta>` charset in the first 4 KiB
(legacy labels widened to what browsers use: gb2312 → gb18030, latin1 → windows-1252), then
sniffing. Trees are walked with explicit stacks, never recursion: 100k nested `<div>`s cost
linear time. Heuristics, chosen to keep all visible text but not the site furniture:
- Extract from the main container (Wikipedia `#mw-content-text`, `role=main`, `<main>`, a lone
  `<article>`, Sphinx `div.body`) if it holds a fifth of the page's text, else from `<body>`.
- A table is layout, walked as ordinary blocks, if it has role=presentation or one column, or
  a cell holds a table, a heading or 1,000+ chars. A data table is one TABLE block, a row per
  line, non-empty cells joined by " | "; a cell's paragraphs, list items and lines are joined
  on its line. A table inside a list item is a block of its own between the item's lines.
- A `<pre>` is verbatim CODE unless plain prose (no child elements or code-ish class, 1,000+
  chars in 3+ blank-line separated parts, under 1% of `{}[];=<>$\\|`), which is split at blank
  lines into paragraphs: they chunk and retrieve better than one giant block.
"""

from __future__ import annotations

import codecs
import re
import warnings
from collections.abc import Iterator
from datetime import datetime
from itertools import islice
from textwrap import dedent

import bs4
from bs4 import BeautifulSoup, CData, NavigableString, Tag

from docingest.pipeline.detect.textcodec import decode_text
from docingest.pipeline.document import Block, BlockKind, DocumentFormat, ExtractedDocument
from docingest.pipeline.errors import CorruptDocument, UnsupportedFormat

# Legacy labels → the superset browsers decode them with (WHATWG Encoding, "Encodings" table).
_SUPERSETS = {
    label: target
    for target, labels in (
        ("windows-1252", "ascii us-ascii iso-8859-1 iso8859-1 iso_8859-1 latin1 latin-1 l1 cp1252"),
        ("gb18030", "gb2312 gbk x-gbk chinese csgb2312 gb_2312-80"),
        ("cp932", "shift_jis shift-jis sjis x-sjis ms_kanji csshiftjis windows-31j"),
        ("cp949", "euc-kr ks_c_5601-1987 korean cseuckr windows-949"),
        ("windows-1254", "iso-8859-9 latin5 l5"),
        ("windows-874", "iso-8859-11 tis-620"),
        ("big5hkscs", "big5"),
    )
    for label in labels.split()
}
_META_TAG = re.compile(rb"<meta\b[^>]*>", re.IGNORECASE)
_CHARSET = re.compile(rb"charset\s*=\s*[\"']?\s*([A-Za-z0-9._:-]+)", re.IGNORECASE)

_DROP_TAGS = frozenset(
    "script style noscript template svg iframe object embed canvas video audio map head title "
    "meta link base input select textarea button option optgroup datalist output meter progress "
    "nav footer rt rp dialog".split()
)
_CHROME_CLASSES = frozenset(
    "related sphinxsidebar sphinxsidebarwrapper navheader navfooter footer breadcrumb "
    "breadcrumbs skip-link skiplink mw-jump-link navbox vertical-navbox mw-editsection "
    "headerlink toc catlinks mw-cite-backlink printfooter".split()
)
_CONTENT_ASIDES = frozenset(("footnote-list", "footnote", "citation-list", "citation", "topic"))
_CHROME_IDS = frozenset(("mw-navigation", "mw-head", "mw-panel", "toc", "footer", "sidebar"))
_CHROME_ROLES = frozenset(("navigation", "banner", "contentinfo", "search"))
_HIDDEN_STYLE = re.compile(r"display\s*:\s*none|visibility\s*:\s*hidden", re.IGNORECASE)

_HEADINGS = frozenset("h1 h2 h3 h4 h5 h6".split())
_LISTS = frozenset("ul ol menu dir".split())
_BLOCK_TAGS = frozenset(
    "address article blockquote body caption center dd details dir div dl dt fieldset figcaption "
    "figure form h1 h2 h3 h4 h5 h6 header hgroup hr html legend li main menu ol p pre section "
    "summary table tbody td tfoot th thead tr ul".split()
)
_ATOMIC_TAGS = _HEADINGS | _LISTS | {"pre", "table"}  # become blocks of their own
_CONTENT_TAGS = frozenset(("article", "main", "section"))
_LAYOUT_SIGNS = _HEADINGS | {"table"}
_CODE_CLASS_HINTS = ("code", "highlight", "program", "screen", "source", "syntax", "shell", "lang")
_CODE_PUNCTUATION = frozenset("{}[];=<>$\\|")

_TEXT_TYPES = (NavigableString, CData)  # exact types: comments, doctypes etc. are not text
_WHITESPACE = re.compile(r"\s+")
_BLANK_LINES = re.compile(r"\n[ \t\f\v\r]*\n\s*")
_SEPARATOR = object()  # stack marker: the block element pushed before it has ended


_INTERNAL_SUBSET = re.compile(
    r"\A\s*(?:<\?xml[^>]*>\s*)?(?:<!--.*?-->\s*)*<!doctype\s[^\[>]*\[.*?\]\s*>", re.I | re.S
)
"""A prologue whose DOCTYPE holds an internal subset (`<!DOCTYPE html [ <!ENTITY ...> ]>`):
an HTML parser ends the doctype at the first `>`, inside the subset, and the rest (`]>`) became
a chunk of its own. Anchored at the start, so matching it is one linear scan."""


def extract_html(data: bytes, *, encoding: str | None) -> ExtractedDocument:
    """Extract an HTML page's main content as blocks, with its title and meta tags."""
    text, used = _decode(data, encoding)
    if prologue := _INTERNAL_SUBSET.match(text):  # declarations only: no content is lost
        text = text[prologue.end() :]
    with warnings.catch_warnings():
        # An XHTML page (<?xml?> prolog) is still HTML to us, and a tiny page may look like a
        # file name to bs4; neither warning says anything about the document.
        warnings.simplefilter("ignore", bs4.XMLParsedAsHTMLWarning)
        warnings.simplefilter("ignore", bs4.MarkupResemblesLocatorWarning)
        try:
            soup = BeautifulSoup(text, "lxml")
        except (bs4.ParserRejectedMarkup, ValueError) as exc:
            raise CorruptDocument(f"The HTML page could not be parsed: {exc}.") from exc
    root, page_h1 = _content_root(soup)
    blocks = _walk(root)
    if page_h1 is not None and (heading := _text(page_h1)):  # e.g. Wikipedia's title
        blocks.insert(0, Block(heading, BlockKind.HEADING, 1))
    return _document(soup, blocks, used)


def _browser_label(label: str) -> str | None:
    """Return the codec browsers use for encoding `label`, or None if Python lacks it."""
    name = label.strip().lower()
    try:
        return codecs.lookup(_SUPERSETS.get(name, name)).name
    except LookupError:
        return None


def _declared_charset(data: bytes) -> str | None:
    """Return the charset a `<meta>` in the first 4 KiB declares (other tags do not count)."""
    for meta in _META_TAG.finditer(data[:4096]):
        if found := _CHARSET.search(meta.group(0)):
            name = _browser_label(found.group(1).decode("ascii"))
            # A meta tag readable as ASCII means the page is not UTF-16, whatever it says.
            return "utf-8" if name and name.startswith("utf-16") else name
    return None


def _decode(data: bytes, encoding: str | None) -> tuple[str, str]:
    """Decode with the encoding detect found (a BOM's) or else the page's meta declaration.

    decode_text still lets a BOM or valid UTF-8 win, and sniffs when the declaration is wrong.
    """
    declared = _browser_label(encoding) if encoding else _declared_charset(data)
    if (decoded := decode_text(data, declared=declared)) is None:
        raise UnsupportedFormat("The HTML page is not text in any character encoding we know.")
    return decoded.text, decoded.encoding


def _is_dropped(tag: Tag) -> bool:
    """True for elements that are never content: scripts, controls, hidden, site chrome."""
    if tag.name in _DROP_TAGS:
        return True
    if tag.name == "header" and not any(p.name in _CONTENT_TAGS for p in islice(tag.parents, 64)):
        return True  # the site banner, not an article's or section's header (64 levels up)
    attrs = tag.attrs
    classes = attrs.get("class") or ()
    if tag.name == "aside" and _CONTENT_ASIDES.isdisjoint(classes):
        return True  # a sidebar; docutils' footnotes, citations and topics are content
    return (
        attrs.get("hidden", "until-found") != "until-found"  # until-found text is searchable
        or str(attrs.get("aria-hidden", "")).lower() == "true"
        or _HIDDEN_STYLE.search(str(attrs.get("style", ""))) is not None
        or not _CHROME_ROLES.isdisjoint(str(attrs.get("role", "")).lower().split())
        or not _CHROME_CLASSES.isdisjoint(classes)
        or attrs.get("id") in _CHROME_IDS
        or (tag.name == "sup" and "reference" in classes)  # Wikipedia citation marks: [1]
    )


def _child_tags(tag: Tag) -> Iterator[Tag]:
    return (c for c in tag.contents if isinstance(c, Tag) and not _is_dropped(c))


def _is_shown(tag: Tag) -> bool:
    return not any(_is_dropped(node) for node in (tag, *tag.parents))


def _content_root(soup: BeautifulSoup) -> tuple[Tag, Tag | None]:
    """Return the element to extract from, and the page's first <h1> if it lies outside it."""
    body = soup.body or soup
    articles = body.find_all("article", limit=2)
    candidates = (
        body.find(id="mw-content-text"),  # Wikipedia
        body.find(role="main"),
        body.find("main"),
        articles[0] if len(articles) == 1 else None,
        body.find("div", class_="body"),  # Sphinx
    )
    h1, total = body.find("h1"), len(body.get_text(strip=True))
    for root in (c for c in candidates if isinstance(c, Tag) and _is_shown(c)):
        if len(root.get_text(strip=True)) * 5 >= total:  # else too small to be the content
            if isinstance(h1, Tag) and _is_shown(h1) and not any(p is root for p in h1.parents):
                return root, h1
            return root, None
    return body, None


def _collect(
    root: Tag, *, verbatim: bool = False, br: str = "\n", stop: frozenset[str] = frozenset()
) -> list[str | Tag]:
    """Return the text under `root` in pieces, and in their place the `stop` elements met."""
    parts: list[str | Tag] = []
    stack: list[object] = list(reversed(root.contents))
    while stack:
        node = stack.pop()
        if node is _SEPARATOR:
            parts.append(" ")
        elif isinstance(node, NavigableString):
            if type(node) in _TEXT_TYPES:
                parts.append(str(node) if verbatim else _WHITESPACE.sub(" ", node))
        elif isinstance(node, Tag) and not _is_dropped(node):
            if node.name in stop:
                parts.append(node)
            elif node.name == "br":
                parts.append(br)
            else:
                if not verbatim and node.name in _BLOCK_TAGS:
                    parts.append(" ")
                    stack.append(_SEPARATOR)
                stack.extend(reversed(node.contents))
    return parts


def _text(root: Tag, *, verbatim: bool = False) -> str:
    """The text under `root`: verbatim, or cleaned onto one line."""
    parts = _collect(root, verbatim=verbatim, br="\n" if verbatim else " ")
    text = "".join(part for part in parts if isinstance(part, str))
    return text if verbatim else _clean(text)


def _clean(text: str) -> str:
    """Collapse whitespace inside each line, strip lines, drop empty ones."""
    lines = (_WHITESPACE.sub(" ", line).strip() for line in text.split("\n"))
    return "\n".join(line for line in lines if line)


def _paragraphs(parts: list[str]) -> list[Block]:
    """Turn gathered inline text into paragraphs, split where two <br> left a blank line."""
    if not parts:
        return []
    paragraphs = (_clean(text) for text in _BLANK_LINES.split("".join(parts)))
    parts.clear()
    return [Block(text) for text in paragraphs if text]


def _walk(root: Tag) -> list[Block]:
    """Turn the content under `root` into blocks, in document order, without recursion."""
    blocks: list[Block] = []
    parts: list[str] = []  # inline text of the paragraph being gathered
    stack: list[object] = list(reversed(root.contents))
    while stack:
        node = stack.pop()
        if node is _SEPARATOR:
            blocks += _paragraphs(parts)
        elif isinstance(node, NavigableString):
            if type(node) in _TEXT_TYPES:
                parts.append(_WHITESPACE.sub(" ", node))
        elif not isinstance(node, Tag) or _is_dropped(node):
            continue
        elif node.name == "br":
            parts.append("\n")
        elif node.name in _ATOMIC_TAGS:
            blocks += _paragraphs(parts)
            if (atomic := _atomic_blocks(node)) is None:  # a layout table: walk into it
                stack.extend([_SEPARATOR, *reversed(node.contents)])
            blocks += [block for block in atomic or () if block.text]
        else:
            if node.name in _BLOCK_TAGS:
                blocks += _paragraphs(parts)
                stack.append(_SEPARATOR)
            stack.extend(reversed(node.contents))
    return blocks + _paragraphs(parts)


def _atomic_blocks(tag: Tag) -> list[Block] | None:
    """Blocks for a heading, list, <pre> or data table; None for a layout table."""
    if tag.name in _HEADINGS:
        return [Block(_text(tag), BlockKind.HEADING, int(tag.name[1]))]
    if tag.name in _LISTS:
        return _list_blocks(tag)
    if tag.name == "pre":
        return _pre_blocks(tag)
    if (rows := _table_rows(tag)) is None:
        return None
    blocks = [Block(_text(caption)) for caption in _child_tags(tag) if caption.name == "caption"]
    if len(rows) == 1:
        return [*blocks, Block(" ".join(rows[0]))]
    return [*blocks, Block("\n".join(" | ".join(row) for row in rows), BlockKind.TABLE)]


def _pre_blocks(pre: Tag) -> list[Block]:
    """A <pre> as one verbatim CODE block, or paragraphs if it is prose (module docstring)."""
    text = _text(pre, verbatim=True).lstrip("\n").rstrip()
    hinted = (pre, pre.parent) if isinstance(pre.parent, Tag) else (pre,)
    classes = " ".join(" ".join(tag.get("class") or ()) for tag in hinted).lower()
    parts = _BLANK_LINES.split(text)
    prose = (
        not any(hint in classes for hint in _CODE_CLASS_HINTS)
        and next(_child_tags(pre), None) is None
        and len(text) >= 1000
        and len(parts) >= 3
        and sum(ch in _CODE_PUNCTUATION for ch in text) < 0.01 * len(text.replace(" ", ""))
    )
    if prose:
        return [Block(cleaned) for part in parts if (cleaned := _clean(part))]
    return [Block(text, BlockKind.CODE)]


def _list_blocks(root: Tag) -> list[Block]:
    """Render a list as LIST lines, "- " or "1. " (nested: indented); a <pre> splits it as CODE."""
    blocks: list[Block] = []
    lines: list[str] = []
    stack: list[tuple[Tag | str, int, str]] = [(root, 0, "")]  # (node, depth, marker)
    while stack:
        node, depth, marker = stack.pop()
        entries: list[tuple[Tag | str, int, str]] = []
        if isinstance(node, str):  # a line of item text
            if text := _clean(node):
                first, *rest = text.split("\n")
                indent = "  " * min(depth, 8)  # capped: deep nesting must not square the size
                lines.append(f"{indent}{marker}{first}")
                lines.extend(f"{indent}  {line}" for line in rest)
        elif node.name == "pre":
            blocks += [Block(dedent("\n".join(lines)), BlockKind.LIST), *_pre_blocks(node)]
            lines = []
        elif node.name == "table":  # a table in an item: its own blocks, the list goes on
            table = _atomic_blocks(node)
            blocks += [Block(dedent("\n".join(lines)), BlockKind.LIST), *(table or _walk(node))]
            lines = []
        elif node.name in _LISTS:  # queue its items, and any lists or text stray inside it
            start = str(node.get("start", "")).strip()
            number = int(start) if start.isdigit() else 1
            for child in node.contents:
                if isinstance(child, Tag) and child.name == "li" and not _is_dropped(child):
                    entries.append((child, depth, f"{number}. " if node.name == "ol" else "- "))
                    number += 1
                elif isinstance(child, Tag) and child.name in _LISTS:
                    entries.append((child, depth + 1, ""))
                elif isinstance(child, Tag) or type(child) in _TEXT_TYPES:
                    entries.append((child if isinstance(child, Tag) else str(child), depth, ""))
        else:  # an item: its text, interrupted by nested lists and <pre>s, in order
            pending: list[str] = []
            for part in [*_collect(node, stop=_LISTS | {"pre", "table"}), None]:
                if isinstance(part, str):
                    pending.append(part)
                    continue
                entries.append(("".join(pending), depth + bool(entries), "" if entries else marker))
                pending = []
                if part is not None:
                    entries.append((part, depth + (part.name in _LISTS), ""))
        stack.extend(reversed(entries))
    blocks.append(Block(dedent("\n".join(lines)), BlockKind.LIST))
    return [block for block in blocks if block.text]


def _table_rows(table: Tag) -> list[list[str]] | None:
    """Return a data table's rows of non-empty cell texts, or None for a layout table."""
    if str(table.get("role", "")).lower() in ("presentation", "none"):
        return None
    rows: list[list[str]] = []
    stack = list(reversed(list(_child_tags(table))))
    while stack:
        tag = stack.pop()
        if tag.name in ("thead", "tbody", "tfoot"):
            stack.extend(reversed(list(_child_tags(tag))))
        elif tag.name == "tr":
            row = []
            for cell in (c for c in _child_tags(tag) if c.name in ("td", "th")):
                parts = _collect(cell, stop=_LAYOUT_SIGNS, br=" ")
                text = "".join(part for part in parts if isinstance(part, str))
                if any(isinstance(part, Tag) for part in parts) or len(text) > 1000:
                    return None  # a table or heading inside, or a long text: layout
                if text := _clean(text).replace("\n", " "):
                    row.append(text)
            if row:
                rows.append(row)
    return rows if any(len(row) > 1 for row in rows) else None


def _document(soup: BeautifulSoup, blocks: list[Block], encoding: str) -> ExtractedDocument:
    """Wrap the blocks with the page's title, language and meta-tag metadata."""
    metas: dict[str, str] = {}  # meta name/property/http-equiv → its first non-empty content
    for meta in soup.find_all("meta"):
        key = meta.get("name") or meta.get("property") or meta.get("http-equiv") or ""
        if content := _WHITESPACE.sub(" ", str(meta.get("content") or "")).strip():
            metas.setdefault(str(key).strip().lower(), content)

    def first(*keys: str) -> str | None:
        return next((metas[key] for key in keys if key in metas), None)

    def date(*keys: str) -> datetime | None:
        try:
            return datetime.fromisoformat(first(*keys) or "")
        except ValueError:  # absent, or not ISO 8601
            return None

    title = _text(soup.title) if soup.title is not None else ""
    author = first("author", "article:author", "dc.creator", "dcterms.creator")
    extra = {"encoding": encoding}
    if description := first("description", "og:description", "dc.description"):
        extra["description"] = description
    html = soup.find("html")
    language = (html.get("lang") or html.get("xml:lang")) if isinstance(html, Tag) else None
    if language := str(language or metas.get("content-language") or "").strip():
        extra["language"] = language
    return ExtractedDocument(
        format=DocumentFormat.HTML,
        blocks=blocks,
        title=title or metas.get("og:title") or None,
        author=None if (author or "").startswith(("http:", "https:")) else author,  # a profile URL
        created=date("article:published_time", "dc.date", "dcterms.created"),
        modified=date("article:modified_time", "dc.date.modified", "dcterms.modified"),
        extra=extra,
    )
