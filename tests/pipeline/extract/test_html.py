"""HTML extraction on the real pages of the corpus, plus a few pages built to pin one rule each."""

from __future__ import annotations

import html
import re
from datetime import datetime, timedelta, timezone
from functools import cache
from pathlib import Path

import pytest

from docingest.pipeline.document import (
    Block,
    BlockKind,
    DocumentFormat,
    ExtractedDocument,
    join_blocks,
)
from docingest.pipeline.errors import UnsupportedFormat
from docingest.pipeline.extract.html import extract_html
from tests.support.paths import CORPUS_DIR

HTML_FILES = sorted(path.name for path in (CORPUS_DIR / "html").iterdir())


@cache
def _extract(name: str) -> ExtractedDocument:
    return extract_html((CORPUS_DIR / "html" / name).read_bytes(), encoding=None)


def _text(name: str) -> str:
    return join_blocks(_extract(name).blocks)[0]


def _blocks(name: str, kind: BlockKind) -> list[Block]:
    return [block for block in _extract(name).blocks if block.kind == kind]


def _pre_texts(path: Path) -> list[str]:
    """The text of every <pre> in a file, read with a regex rather than the parser under test."""
    raw = path.read_text(encoding="utf-8")
    return [
        html.unescape(re.sub(r"<[^>]+>", "", pre))
        for pre in re.findall(r"<pre[^>]*>(.*?)</pre>", raw, re.S)
    ]


@pytest.mark.parametrize("name", HTML_FILES)
def test_every_corpus_page_extracts_clean_text(name: str) -> None:
    document = _extract(name)
    text = _text(name)
    assert document.format is DocumentFormat.HTML
    assert document.blocks
    assert "\ufffd" not in text
    for script_fragment in ("function(", "window.", "var ", "document.getElementById"):
        assert script_fragment not in text, f"{name}: script text leaked: {script_fragment!r}"
    for block in document.blocks:
        if block.kind is BlockKind.CODE:
            assert block.text.strip()
            continue
        for line in block.text.split("\n"):  # normalised: no blank or padded lines, single spaces
            words = line.lstrip() if block.kind is BlockKind.LIST else line  # lists indent
            assert words and words == words.strip() and "  " not in words, (name, block)


@pytest.mark.parametrize(
    "name", ["reuters-parasite.html", "theverge-ios13.html", "winfuture-nasa-iso-8859-1.html"]
)
def test_script_heavy_pages_lose_their_scripts(name: str) -> None:
    raw = (CORPUS_DIR / "html" / name).read_bytes()
    for fragment in ("function(", "window."):
        assert fragment.encode() in raw
        assert fragment not in _text(name)


@pytest.mark.parametrize(
    "name",
    [
        "python311-library-datetime.html",
        "python311-library-os.html",
        "python311-tutorial-introduction.html",
    ],
)
def test_sphinx_navigation_and_sidebar_are_dropped(name: str) -> None:
    raw = (CORPUS_DIR / "html" / name).read_text(encoding="utf-8")
    text = _text(name)
    for chrome in ("Previous topic", "Next topic", "Quick search", "Show Source", "Report a Bug"):
        assert chrome in raw  # the page has it ...
        assert chrome not in text  # ... the extraction does not
    assert "Navigation" not in {block.text for block in _extract(name).blocks}
    assert "¶" not in text  # heading permalinks


def test_docbook_navigation_and_table_of_contents_are_dropped() -> None:
    text = _text("debian-reference-ch01.en.html")
    assert "Table of Contents" not in text
    assert "Chapter 2. Debian package management" not in text  # the navfooter's "next" link
    assert text.startswith("Chapter 1. GNU/Linux tutorials\n\nI think learning a computer system")


def test_sphinx_headings_keep_their_levels() -> None:
    headings = {
        block.text: block.level
        for block in _blocks("python311-library-datetime.html", BlockKind.HEADING)
    }
    assert headings["datetime — Basic date and time types"] == 1
    assert headings["Aware and Naive Objects"] == 2
    assert headings["strftime() and strptime() Format Codes"] == 3


def test_sphinx_strftime_table_rows() -> None:
    tables = [block.text for block in _blocks("python311-library-datetime.html", BlockKind.TABLE)]
    codes = next(
        table for table in tables if table.startswith("Directive | Meaning | Example | Notes\n%a")
    )
    assert (
        "%a | Weekday as locale’s abbreviated name. | "
        "Sun, Mon, …, Sat (en_US); So, Mo, …, Sa (de_DE) | (1)" in codes.split("\n")
    )


def test_sphinx_code_blocks_are_verbatim() -> None:
    name = "python311-tutorial-introduction.html"
    codes = [block.text for block in _blocks(name, BlockKind.CODE)]
    expected = [pre.lstrip("\n").rstrip() for pre in _pre_texts(CORPUS_DIR / "html" / name)]
    assert len(expected) == 41
    assert codes == expected  # every <pre>, in order, including the two inside list items
    diagram = " +---+---+---+---+---+---+\n | P | y | t | h | o | n |\n +---+---+---+---+---+---+"
    assert any(code.startswith(diagram) for code in codes)


def test_pre_inside_a_list_item_splits_the_list_in_order() -> None:
    blocks = _extract("python311-tutorial-introduction.html").blocks
    start = next(i for i, block in enumerate(blocks) if block.text.startswith(">>> i = 256*256"))
    assert blocks[start - 1].kind is BlockKind.LIST
    assert blocks[start - 1].text.endswith("so you can format things nicely, like this:")
    assert blocks[start + 1].text.startswith("The keyword argument end can be used")


def test_sphinx_footnotes_are_content() -> None:
    assert "If, that is, we ignore the effects of Relativity" in _text(
        "python311-library-datetime.html"
    )


def test_wikipedia_article_body_title_and_references() -> None:
    name = "wikipedia-duck.html"
    blocks = _extract(name).blocks
    text = _text(name)
    # The page's <h1> lies outside #mw-content-text; it still leads the blocks.
    assert blocks[0] == Block("Duck", BlockKind.HEADING, 1)
    assert (
        "Duck is the common name for numerous species of waterfowl in the family Anatidae. "
        "Ducks are generally smaller and shorter-necked than swans and geese, which are members "
        "of the same family."
    ) in text
    assert Block("Etymology", BlockKind.HEADING, 2) in blocks
    for chrome in ("Jump to content", "Main page", "Retrieved from"):  # skip link, menu, footer
        assert chrome not in text
    assert any(block.kind is BlockKind.LIST and "Duck test" in block.text for block in blocks)
    assert _extract(name).title == "Duck - Wikipedia"
    assert _extract(name).extra["language"] == "en"


def test_iso_8859_1_page_decodes_as_windows_1252() -> None:
    name = "winfuture-nasa-iso-8859-1.html"
    document = _extract(name)
    assert document.extra["encoding"] == "cp1252"  # the superset browsers use for latin-1
    assert "Gebühren werden hierfür nicht fällig." in _text(name)
    assert document.title == "NASA+ Streaming startet: Ohne Registrierung, Gebühren oder Werbung"
    assert document.extra["description"].startswith(
        "Die NASA hat mindestens ebenso spektakuläre und spannende Dinge zu bieten wie die "
        "großen Medienkonzerne."
    )
    assert document.extra["language"] == "de"
    assert document.created == datetime(2023, 11, 3, 15, 32, tzinfo=timezone(timedelta(hours=1)))


def test_windows_1252_page() -> None:
    name = "auto-presse-minisuv-windows-1252.html"
    assert _extract(name).extra["encoding"] == "cp1252"
    assert (
        "Den Vortrieb übernimmt immer der 1,5-Liter-Hybridantrieb, für den optionalen "
        "Allradantrieb entscheidet sich jeder vierte Käufer."
    ) in _text(name)
    assert (
        Block("Japanisches Mini-SUV auf dem Vormarsch", BlockKind.HEADING, 1)
        in _extract(name).blocks
    )
    assert "Staumeldungen" not in _text(name)  # the <nav> menu


def test_gb2312_page_decodes_despite_earlier_script_charset() -> None:
    name = "xinhuanet-hebei-gb2312.html"
    assert _extract(name).extra["encoding"] == "gb18030"
    assert "一个约定，信守15年，感人至深；一段真情，延续15年，催人泪下。" in _text(name)
    assert _extract(name).title == "话剧《约定无期限》河北各市巡演结束"


def test_shift_jis_page_without_declaration_is_sniffed() -> None:
    name = "shift_jis-no-charset-declared.html"
    assert _extract(name).extra["encoding"] == "cp932"
    assert "衆院議院運営委員会は９日午後の理事会で、１３日に本会議を開き" in _text(name)


def test_japanese_docbook_page() -> None:
    name = "debian-reference-ch04.ja.html"
    assert Block("4.1. 通常の Unix 認証", BlockKind.HEADING, 2) in _extract(name).blocks
    assert (
        "人 (またはプログラム) がシステムへのアクセスの要求をした際に、"
        "認証はその正体が信頼できるものだと確認します。" in _text(name)
    )


def test_utf16_page_whose_meta_says_utf8() -> None:
    name = "steeljis-datasheet-utf16le-meta-says-utf8.html"
    data = (CORPUS_DIR / "html" / name).read_bytes()
    sniffed, detected = _extract(name), extract_html(data, encoding="utf-16-le")
    for document in (sniffed, detected):
        assert document.extra["encoding"] == "utf-16-le"
        heading = Block("SteelJIS: Japanese Steels and Alloys", BlockKind.HEADING, 1)
        assert document.blocks[0] == heading
        first_lines = [block.text.split("\n")[0] for block in document.blocks]
        assert "C | Si | Mn | P | S | Cr | Mo" in first_lines  # the chemical composition table
        assert document.author == "SteelJIS(.com)"


def test_news_pages_keep_the_article_and_metadata() -> None:
    reuters = _extract("reuters-parasite.html")
    assert (
        reuters.title
        == "'Parasite' scores historic upset at SAG awards, boosting Oscar chances | Reuters"
    )
    assert reuters.author == "Jill Serjeant"
    assert reuters.extra["description"].startswith(
        'South Korean thriller "Parasite" was the upset winner'
    )
    assert (
        "“Parasite,” the Korean language social satire about the wealth gap in South Korea"
        in _text("reuters-parasite.html")
    )
    verge = _extract("theverge-ios13.html")
    assert verge.author == "Jon Porter"
    assert verge.created == datetime(2019, 7, 3, 4, 22, 7, tzinfo=timezone(timedelta(hours=-4)))
    assert "Dave Schukin explains that the effect is being achieved using ARKit" in _text(
        "theverge-ios13.html"
    )
    assert "Good Deals" not in _text("theverge-ios13.html")  # an <aside>
    isw = _text("isw-campaign-assessment-drupal.html")
    assert (
        "Belarusian forces remain unlikely to attack Ukraine despite a snap Belarusian military"
        in isw
    )


def test_layout_table_page_becomes_paragraphs() -> None:
    name = "paulgraham-how-to-get-new-ideas.html"
    blocks = _extract(name).blocks
    assert all(block.kind is BlockKind.PARAGRAPH for block in blocks)
    assert blocks[0].text == "January 2023"
    assert blocks[2].text.startswith(
        "The way to get new ideas is to notice anomalies: what seems strange,"
    )
    assert _extract(name).title == "How to Get New Ideas"


def test_sec_10k_tables_and_hidden_xbrl_header() -> None:
    name = "sec-10k-filing.html"
    tables = [block.text for block in _blocks(name, BlockKind.TABLE)]
    assert len(tables) >= 40
    assert any(
        "Licensing fees | $ | 19,984,378 | $ | 10,230,316" in table.split("\n") for table in tables
    )
    assert (
        "Title of each class | Trading symbol | Name of exchange on which registered\n"
        "Common stock | GLXZ | OTCQB marketplace" in tables
    )
    text = _text(name)
    # A one-row table ("•" | text) is a line of text, not a table.
    assert (
        Block("• Expand our portfolio of services, products and technologies;")
        in _extract(name).blocks
    )
    assert "us-gaap:CommonStockMember" not in text  # XBRL facts inside display:none
    assert text.startswith("UNITED STATES\n\nSECURITIES AND EXCHANGE COMMISSION")


def test_law_inside_one_pre_is_complete_and_split_into_paragraphs() -> None:
    name = "usa-patriot-act-pre.htm"
    (pre,) = _pre_texts(CORPUS_DIR / "html" / name)
    blocks = _extract(name).blocks
    assert " ".join(_text(name).split()) == " ".join(pre.split())  # every word, in order
    assert len(blocks) > 800 and all(block.kind is BlockKind.PARAGRAPH for block in blocks)
    assert Block("SECTION 1. SHORT TITLE AND TABLE OF CONTENTS.") in blocks
    assert "<<NOTE: Oct. 26, 2001 - [H.R. 3162]>>" in _text(name)  # entities unescaped


def test_deeply_nested_divs_do_not_recurse() -> None:
    data = (
        "<html><body>" + "<div>" * 100_000 + "deep text" + "</div>" * 100_000 + "</body></html>"
    ).encode()
    assert extract_html(data, encoding=None).blocks == [Block("deep text")]


def test_deeply_nested_lists_stay_linear_in_size() -> None:
    data = ("<ul><li>x" * 10_000 + "</li></ul>" * 10_000).encode()
    (block,) = extract_html(data, encoding=None).blocks
    assert block.kind is BlockKind.LIST and block.text.count("- x") == 10_000
    assert len(block.text) < 30 * 10_000  # indentation is capped, not 2 spaces per level


def test_only_meta_tags_declare_the_charset() -> None:
    russian = "Съешь же ещё этих мягких французских булок, да выпей чаю."
    page = (
        b'<html><head><script charset="utf-8" src="a.js"></script>'
        b'<meta http-equiv="Content-Type" content="text/html; charset=cp866"></head>'
        b"<body><p>" + russian.encode("cp866") + b"</p></body></html>"
    )
    document = extract_html(page, encoding=None)
    assert document.blocks == [Block(russian)]
    assert document.extra["encoding"] == "cp866"  # sniffing alone would have said cp1125


def test_declared_legacy_charsets_widen_to_the_browser_superset() -> None:
    korean = "대한민국 헌법 제1조"
    page = b'<meta charset="EUC-KR"><p>' + korean.encode("euc-kr") + b"</p>"
    document = extract_html(page, encoding=None)
    assert document.blocks == [Block(korean)]
    assert document.extra["encoding"] == "cp949"


def test_undecodable_bytes_are_unsupported() -> None:
    with pytest.raises(UnsupportedFormat) as raised:
        extract_html(bytes(range(256)) * 4, encoding=None)
    assert raised.value.code == "unsupported_format"


def test_structure_rules_on_a_built_page() -> None:
    page = """<html lang="fr"><head><title> A   page </title><meta name="author" content="Ann">
    <meta name="dc.date" content="not a date"></head><body>
    <header><a href="/">Site banner</a></header>
    <main><article><header><h1>Title  here</h1></header>
    <p>First<br>line two<br><br>Second paragraph</p>
    <p hidden>hidden text</p><p aria-hidden="true">aria text</p>
    <p style="color: red; display: none">css text</p>
    <div role="navigation">menu</div><button>Click</button>
    <ol start="3"><li>three<ul><li>nested</li></ul>more</li><li>four</li></ol>
    <dl><dt>Term</dt><dd>Definition</dd></dl>
    <table><tr><th>k</th><th>v</th></tr><tr><td>a</td><td></td><td>1</td></tr></table>
    loose text</article></main><footer>Copyright</footer></body></html>"""
    document = extract_html(page.encode("utf-8"), encoding=None)
    assert document.blocks == [
        Block("Title here", BlockKind.HEADING, 1),
        Block("First\nline two"),
        Block("Second paragraph"),
        Block("3. three\n  - nested\n  more\n4. four", BlockKind.LIST),
        Block("Term"),
        Block("Definition"),
        Block("k | v\na | 1", BlockKind.TABLE),
        Block("loose text"),
    ]
    assert (document.title, document.author, document.created) == ("A page", "Ann", None)
    assert document.extra == {"encoding": "utf-8", "language": "fr"}


def test_an_internal_dtd_after_an_xml_prolog_is_not_a_chunk() -> None:
    """The parser ended the DOCTYPE at the first `>`, inside the subset: `]>` became text."""
    page = (
        b'<?xml version="1.0" encoding="utf-8"?>\n'
        b'<!DOCTYPE html [\n  <!ENTITY product "Harbour Tide Tables">\n  <!ELEMENT p ANY>\n]>\n'
        b"<html><head><title>Tides</title></head>"
        b"<body><p>The ferry leaves at dawn on Sunday.</p></body></html>\n"
    )
    document = extract_html(page, encoding=None)
    assert [block.text for block in document.blocks] == ["The ferry leaves at dawn on Sunday."]
    assert document.title == "Tides"


def test_table_inside_a_list_item_keeps_its_rows() -> None:
    page = (
        b"<ul><li>Install the packages:<table><tr><th>package</th><th>role</th></tr>"
        b"<tr><td>mc</td><td>file manager</td></tr></table></li><li>Then log in.</li></ul>"
    )
    blocks = extract_html(page, encoding=None).blocks
    assert [(b.kind, b.text) for b in blocks] == [
        (BlockKind.LIST, "- Install the packages:"),
        (BlockKind.TABLE, "package | role\nmc | file manager"),
        (BlockKind.LIST, "- Then log in."),
    ]


def test_cells_with_paragraphs_lists_and_breaks_stay_one_row_each() -> None:
    page = (
        b"<table><tr><th>Option</th><th>Meaning</th></tr>"
        b"<tr><td><p>-a</p></td><td><p>All files.</p>\n\n<p>Hidden ones too.</p></td></tr>"
        b"<tr><td>-l<br><br>(long)</td><td><ul><li>size</li><li>owner</li></ul></td></tr></table>"
    )
    blocks = extract_html(page, encoding=None).blocks
    assert [(b.kind, b.text) for b in blocks] == [
        (
            BlockKind.TABLE,
            "Option | Meaning\n-a | All files. Hidden ones too.\n-l (long) | size owner",
        )
    ]
