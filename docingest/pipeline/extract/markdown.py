"""Markdown: YAML front matter to metadata; the body rendered with Python-Markdown and walked.

Where Python-Markdown departs from CommonMark/GFM in ways that lose text or structure, the
source is adjusted first. Fenced code and HTML blocks are stashed behind placeholders and put
back when the walk meets them: code byte for byte (Python-Markdown expands tabs and misses
fences indented in lists or quotes), HTML blocks ending at a blank line as in CommonMark (so
Markdown after `<details>` still renders). Nested list items are re-indented to the 4 spaces
it needs. Dialects are reduced to plain Markdown: MDX `import`/`export` lines and JSX
component tags (dropped, their content dedented), `:::` and `!!!` admonitions (markers
dropped, titles kept), MyST `(label)=` targets and `%` comments.
"""

from __future__ import annotations

import datetime as dt
import re
from typing import Any

import markdown
import yaml
from bs4 import BeautifulSoup, NavigableString, Tag

from docingest.pipeline.document import Block, BlockKind, DocumentFormat, ExtractedDocument
from docingest.pipeline.extract.text import decode_document

_FRONT_MATTER = re.compile(r"\A---[ \t]*\n(.*?)\n?^(?:---|\.\.\.)[ \t]*(?:\n|\Z)", re.S | re.M)
_FENCE = re.compile(r"(?P<quote>(?: *> ?)*)(?P<indent> *)(?P<marker>`{3,}|~{3,})[ \t]*(?P<info>.*)")
_QUOTE_MARK = re.compile(r" *> ?")
_LIST_ITEM = re.compile(r"( *)([-*+]|\d{1,9}[.)])( +|$)")
_HTML_BLOCK = re.compile(
    r" {0,3}(?:(?P<comment><!--)|<(?P<raw>script|pre|style|textarea)(?:[\s>]|$)|</?(?:address|"
    r"article|aside|blockquote|body|caption|center|col|colgroup|dd|details|dialog|dir|div|dl|"
    r"dt|fieldset|figcaption|figure|footer|form|h[1-6]|head|header|hr|html|iframe|legend|li|"
    r"main|menu|nav|ol|p|section|summary|table|tbody|td|tfoot|th|thead|title|tr|ul)(?:[\s/>]|$))",
    re.I,
)
_ONE_LINE_ELEMENT = re.compile(r"\s*<(\w+)\b.*</\1>\s*$")
_SKIPPED_LINE = re.compile(r"\([^()\s]+\)=\s*$|%(?:\s|$)|\s*:{3,}\s*$")  # targets, comments, :::
_COLON_OPEN = re.compile(
    r"\s*:{3,}[ \t]*(?:\{.*|[A-Za-z][\w-]*(?:\[(?P<title>[^\]]*)\])?(?P<rest>.*))"
)
_MKDOCS_OPEN = re.compile(
    r'(?P<indent> *)(?:!!!|\?\?\?\+?)[ \t]+[\w-]+(?:[ \t]+"(?P<title>[^"]*)")?\s*$'
)
_MDX_STATEMENT = re.compile(
    r"(?:import\s+(?:.+\s+from\s+)?['\"][^'\"]+['\"]|export\s+(?:default|const|let|var|function|\{)).*"
)
_JSX_TAG = re.compile(r"\s*<(?P<close>/)?[A-Z][a-z][\w.]*(?:\s[^<>]*)?(?P<selfclosing>/)?>\s*$")
_PLACEHOLDER = re.compile(r"XDOCINGEST(\d{6})X")
_SPACES = re.compile(r"\s+")
_LINE_SPACES = re.compile(r"[ \t]+")

_LISTS = frozenset({"ul", "ol"})
_HEADINGS = frozenset({"h1", "h2", "h3", "h4", "h5", "h6"})
_CONTAINERS = frozenset(
    "div blockquote details summary section article header footer main aside nav figure "
    "figcaption center dl dt dd address form fieldset".split()
)
_BLOCKS = _CONTAINERS | _LISTS | _HEADINGS | {"p", "pre", "table", "hr"}
_SKIPPED = frozenset({"script", "style", "template", "head", "title", "noscript", "hr"})


def extract_markdown(data: bytes, *, encoding: str | None) -> ExtractedDocument:
    """Extract a Markdown document: headings, paragraphs, lists, code and tables."""
    text, used = decode_document(data, encoding=encoding)
    front_matter, body = _split_front_matter(text)
    prepared, stash = _prepare(body)
    renderer = markdown.Markdown(extensions=["fenced_code", "tables", "sane_lists"])
    renderer.ESCAPED_CHARS = list("!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~")  # as CommonMark
    walker = _Walker(stash)
    walker.walk(renderer.convert(prepared))
    h1 = (b.text for b in walker.blocks if b.kind is BlockKind.HEADING and b.level == 1)
    title = _as_text(front_matter.pop("title", None)) or next(h1, None)
    author = _as_text(front_matter.pop("author", None))
    extra: dict[str, Any] = {"encoding": used} | (
        {"front_matter": front_matter} if front_matter else {}
    )
    return ExtractedDocument(
        DocumentFormat.MARKDOWN, walker.blocks, title=title, author=author, extra=extra
    )


# --- front matter --------------------------------------------------------------------------
def _split_front_matter(text: str) -> tuple[dict[str, Any], str]:
    """Return the JSON-safe front matter (empty if none or invalid) and the body after it."""
    if (match := _FRONT_MATTER.match(text)) is None:
        return {}, text
    try:
        loaded = yaml.safe_load(match.group(1))
    except yaml.YAMLError:
        return {}, text[match.end() :]  # invalid YAML: kept out of the text, nothing recorded
    if loaded is not None and not isinstance(loaded, dict):
        return {}, text  # `---` rules around prose, not front matter
    return _json_safe(loaded or {}), text[match.end() :]


_DROP = object()


def _json_safe(value: Any) -> Any:
    """Dates become ISO strings; what JSON cannot hold (sets, bytes, NaN) is dropped."""
    if value is None or isinstance(value, bool | int | str):
        return value
    if isinstance(value, float):
        return value if abs(value) < float("inf") else _DROP  # NaN fails the test too
    if isinstance(value, dt.date | dt.time):
        return value.isoformat()
    if isinstance(value, dict):
        pairs = ((str(key), _json_safe(item)) for key, item in value.items())
        return {key: item for key, item in pairs if item is not _DROP}
    if isinstance(value, list):
        return [item for item in map(_json_safe, value) if item is not _DROP]
    return _DROP


def _as_text(value: Any) -> str | None:
    """A front matter value as text: a string, a person's `name`, or a list of them."""
    if isinstance(value, dict):
        return _as_text(value.get("name"))
    if isinstance(value, list):
        return ", ".join(text for item in value if (text := _as_text(item))) or None
    return None if value is None else (str(value).strip() or None)


# --- source preparation --------------------------------------------------------------------
def _prepare(body: str) -> tuple[str, list[tuple[str, str]]]:
    """Stash fenced code and HTML blocks behind placeholders; reduce dialect syntax."""
    lines, out, stash = body.split("\n"), [], []  # stash: ("code" | "html", text)
    mdx = any(_MDX_STATEMENT.fullmatch(line) for line in lines)
    jsx: list[int | None] = []  # content indentation of each open JSX component
    admonition: int | None = None  # content indentation of an open MkDocs admonition
    unwrapped: list[str] = []  # closing markers of fences whose content is Markdown
    i = 0
    while i < len(lines):
        line, i = lines[i], i + 1
        if mdx and _jsx_tag(line := _dedent_jsx(line, jsx), jsx):
            continue
        if admonition is not None and line.strip():
            admonition, line = (
                (admonition, line[4:]) if _indent(line) >= admonition else (None, line)
            )
        fence = _FENCE.match(line)
        if unwrapped and _closes(line, unwrapped[-1]):
            unwrapped.pop()
        elif fence and not (fence["marker"][0] == "`" and "`" in fence["info"]):
            if fence["info"].strip() == "mdx-code-block":  # MDX to run, not code to show
                unwrapped.append(fence["marker"])
                continue
            code, i = _take_code(lines, i, fence, jsx if mdx else None)
            stash.append(("code", "\n".join(code)))
            out.extend(["", f"XDOCINGEST{len(stash) - 1:06d}X", ""])
        elif html := _HTML_BLOCK.match(line):
            chunk, i = _take_html(line, lines, i, html)
            if not html["comment"]:
                stash.append(("html", chunk))
                out.extend(["", f"XDOCINGEST{len(stash) - 1:06d}X", ""])
        elif marker := _COLON_OPEN.fullmatch(line) or _MKDOCS_OPEN.match(line):
            if marker.re is _MKDOCS_OPEN:
                admonition = len(marker["indent"]) + 4
            title = marker.groupdict().get("title") or marker.groupdict().get("rest") or ""
            out.extend(["", title.strip(), ""])
        elif not (_SKIPPED_LINE.match(line) or (mdx and _MDX_STATEMENT.fullmatch(line))):
            out.append(line)
    return "\n".join(_renest_lists(out)), stash


def _take_code(
    lines: list[str], i: int, fence: re.Match[str], jsx: list[int | None] | None
) -> tuple[list[str], int]:
    """Collect a fence's lines from `i`, without the quote marks and indentation it has."""
    indent, marker, quotes = len(fence["indent"]), fence["marker"], fence["quote"].count(">")
    code: list[str] = []
    while i < len(lines):
        line, i = (_dedent_jsx(lines[i], jsx) if jsx else lines[i]), i + 1
        for _ in range(quotes):
            if mark := _QUOTE_MARK.match(line):
                line = line[mark.end() :]
        if _closes(line, marker):
            break
        code.append(line[min(indent, _indent(line)) :])
    return code, i


def _take_html(first: str, lines: list[str], i: int, start: re.Match[str]) -> tuple[str, int]:
    """Collect an HTML block as CommonMark does: to a blank line, or to its end marker."""
    end = "-->" if start["comment"] else f"</{start['raw']}>" if start["raw"] else None
    chunk = [first]
    if end is None and _ONE_LINE_ELEMENT.match(first):
        return first, i
    while not (end and end in chunk[-1].lower()) and i < len(lines):
        if end is None and (not lines[i].strip() or _JSX_TAG.match(lines[i])):
            break
        chunk.append(lines[i])
        i += 1
    return "\n".join(chunk), i


def _renest_lists(lines: list[str]) -> list[str]:
    """Indent nested list items 4 spaces a level and set lists off from paragraphs.

    GFM nests an item indented to its parent's content (2 spaces under `- `) and lets a list
    interrupt a paragraph; Python-Markdown needs 4 spaces and a blank line.
    """
    out: list[str] = []
    items: list[tuple[int, int]] = []  # open items: (content column in source, output indent)
    after_blank = True
    for line in lines:
        indent, item = _indent(line), _LIST_ITEM.match(line)
        if not line.strip():
            after_blank = True
            out.append(line)
            continue
        if item and not items and not after_blank and item[2][0] not in "-*+1":
            item = None  # GFM: only a bullet or `1.` may interrupt a paragraph
        if item or (items and after_blank):
            while items and indent < items[-1][0]:
                items.pop()
        if item:
            if not items and not after_blank:
                out.append("")
            level = items[-1][1] + 4 if items else 0
            items.append((indent + len(item[2]) + max(len(item[3]), 1), level))
            line = " " * level + line[indent:]
        elif items and after_blank:  # a later paragraph of the open item
            line = " " * (items[-1][1] + 4 + indent - items[-1][0]) + line[indent:]
        after_blank = False
        out.append(line)
    return out


def _closes(line: str, marker: str) -> bool:
    stripped = line.strip()
    return len(stripped) >= len(marker) and stripped == marker[0] * len(stripped)


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip(" "))


def _dedent_jsx(line: str, jsx: list[int | None]) -> str:
    """Remove the indentation JSX nesting gave `line` (the first content line sets it)."""
    if not jsx or not line.strip():
        return line
    base = jsx[-1] = _indent(line) if jsx[-1] is None else jsx[-1]
    return line[min(base, _indent(line)) :]


def _jsx_tag(line: str, jsx: list[int | None]) -> bool:
    """Whether `line` is a JSX component tag alone on its line; track nesting if so."""
    if not (tag := _JSX_TAG.match(line)):
        return False
    if tag["close"] and jsx:
        jsx.pop()
    elif not tag["close"] and not tag["selfclosing"]:
        jsx.append(None)
    return True


# --- walking the rendered HTML -------------------------------------------------------------
def _text(node: Tag | NavigableString) -> str:
    """Inline text with whitespace collapsed; `<br>` becomes a newline."""
    if isinstance(node, NavigableString):
        return _SPACES.sub(" ", node) if type(node) is NavigableString else ""  # not comments
    if node.name in _SKIPPED:
        return ""
    children = (child for child in node.children if isinstance(child, Tag | NavigableString))
    return "\n" if node.name == "br" else "".join(map(_text, children))


def _clean(text: str) -> str:
    lines = (_LINE_SPACES.sub(" ", line).strip() for line in text.split("\n"))
    return "\n".join(line for line in lines if line)


class _Walker:
    """Turn rendered HTML into blocks, putting stashed code and HTML back in place."""

    def __init__(self, stash: list[tuple[str, str]]) -> None:
        self.stash = stash
        self.blocks: list[Block] = []

    def walk(self, html: str) -> None:
        if (body := BeautifulSoup(html, "lxml").body) is not None:
            self._container(body)

    def _container(self, node: Tag) -> None:
        pieces: list[str] = []
        for child in node.children:
            if isinstance(child, Tag) and child.name in _BLOCKS:
                self._paragraph("".join(pieces))
                pieces = []
                self._block(child)
            elif isinstance(child, Tag | NavigableString):
                pieces.append(_text(child))
        self._paragraph("".join(pieces))

    def _block(self, node: Tag) -> None:
        if node.name in _HEADINGS:
            if text := _SPACES.sub(" ", self._restore(_text(node))).strip():
                self.blocks.append(Block(text, BlockKind.HEADING, level=int(node.name[1])))
        elif node.name == "p":
            self._paragraph(_text(node))
        elif node.name in _LISTS:
            if lines := self._list_lines(node, 0):
                self.blocks.append(Block("\n".join(lines), BlockKind.LIST))
        elif node.name == "pre":
            self._code(node.get_text())
        elif node.name == "table":
            if rows := self._table_rows(node):
                self.blocks.append(Block("\n".join(rows), BlockKind.TABLE))
        elif node.name in _CONTAINERS:
            self._container(node)

    def _paragraph(self, text: str) -> None:
        """Add the paragraphs in `text`, and the stashed blocks its placeholders stand for."""
        for position, part in enumerate(_PLACEHOLDER.split(text)):
            if position % 2 == 0:
                if cleaned := _clean(part):
                    self.blocks.append(Block(cleaned, BlockKind.PARAGRAPH))
            elif (stashed := self.stash[int(part)])[0] == "code":
                self._code(stashed[1])
            elif (body := BeautifulSoup(stashed[1], "lxml").body) is not None:
                self._container(body)

    def _code(self, code: str) -> None:
        if code.strip():
            self.blocks.append(Block(code.strip("\n"), BlockKind.CODE))

    def _table_rows(self, table: Tag) -> list[str]:
        rows = (
            " | ".join(_SPACES.sub(" ", self._restore(_text(cell))).strip() for cell in cells)
            for row in table.find_all("tr")
            if (cells := row.find_all(["th", "td"], recursive=False))
        )
        return [row for row in rows if row.strip(" |")]

    def _restore(self, text: str) -> str:
        """Text with placeholders replaced by what they stand for (inside lists and tables)."""
        return _PLACEHOLDER.sub(lambda match: self._stashed_text(int(match.group(1))), text)

    def _stashed_text(self, index: int) -> str:
        kind, stashed = self.stash[index]
        return stashed if kind == "code" else _text(BeautifulSoup(stashed, "lxml"))

    def _list_lines(self, node: Tag, depth: int) -> list[str]:
        """One line per item (`- ` or `N. `), nested lists indented two spaces a level."""
        start = node.get("start")
        first = int(start) if isinstance(start, str) and start.isdigit() else 1
        lines: list[str] = []
        for number, item in enumerate(node.find_all("li", recursive=False), start=first):
            marker = f"{number}. " if node.name == "ol" else "- "
            lead, pad = "  " * depth + marker, "  " * depth + " " * len(marker)
            for position, (own, line) in enumerate(self._item_lines(item, depth)):
                if position == 0 and not own:
                    lines.append(lead.rstrip())
                lines.append(((pad if position else lead) + line) if own else line)
        return lines

    def _item_lines(self, item: Tag, depth: int) -> list[tuple[bool, str]]:
        """The item's own lines (True) and its nested lists' ready-made lines (False)."""
        lines: list[tuple[bool, str]] = []
        pieces: list[str] = []

        def flush() -> None:
            text = _clean(self._restore("".join(pieces)))
            lines.extend((True, line) for line in text.split("\n") if line)
            pieces.clear()

        for child in item.children:
            if isinstance(child, Tag) and child.name in _LISTS | {"pre", "table"}:
                flush()
                if child.name == "pre":  # verbatim
                    lines.extend((True, line) for line in child.get_text().strip("\n").split("\n"))
                elif child.name == "table":
                    lines.extend((True, row) for row in self._table_rows(child))
                else:
                    lines.extend((False, line) for line in self._list_lines(child, depth + 1))
            elif isinstance(child, Tag | NavigableString):
                pieces.append(_text(child))
                if isinstance(child, Tag) and child.name in _BLOCKS:
                    flush()
        flush()
        return lines
