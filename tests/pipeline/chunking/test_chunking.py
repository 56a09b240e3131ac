"""Chunking: invariants over random documents, and real documents from the corpus."""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tokenizers import Tokenizer, models, pre_tokenizers, trainers

from docingest.pipeline.chunking import Chunk, chunk_document, chunk_text, iter_chunks
from docingest.pipeline.chunking.tokens import LengthFunction, TokenCounter, char_length
from docingest.pipeline.document import Block, BlockKind, join_blocks

CJK_ENDS = "。！？」』”’）)]»\"'"  # CJK sentence punctuation and the closers that may follow it

# --- random documents ------------------------------------------------------------------------

_SAMPLE_WORDS = [
    *"the a I Dr. Mr. e.g. i.e. 3.14 U.S. 1. 2) naïve über WebSocket résumé — (see it).".split(),
    *"東京 这是一个句子。 你好！ 東京都。「引用」 😀 👍🏽 Hello world ok … end! why?".split(),
    *"- * | >".split(),
    "https://example.com/a/very/long/path?query=1&x=2",
    "x" * 30,
]
_words = st.one_of(
    st.sampled_from(_SAMPLE_WORDS),
    st.text(
        alphabet=st.characters(blacklist_categories=["Cs", "Zs", "Zl", "Zp", "Cc"]),
        min_size=1,
        max_size=12,
    ),
    st.text(alphabet="abcdefghij0123456789+/=", min_size=40, max_size=400),  # base64-like
)
_separators = st.sampled_from(
    [" "] * 8
    + ["  ", "\t", "\n", "\n\n", "\n \n", ". ", "! ", "? ", "。", "\u3000", "\xa0", " \n   "]
    + ["... ", ".\n", "\n\n\n", "\n- ", "\n1. ", "\n| ", "\x0c", "\u2028"]
)
texts = st.lists(st.tuples(_words, _separators), max_size=60).map(
    lambda pairs: "".join(word + separator for word, separator in pairs)
)


@st.composite
def block_lists(draw: st.DrawFn) -> list[Block]:
    blocks = []
    page = draw(st.one_of(st.none(), st.integers(1, 3)))
    for _ in range(draw(st.integers(0, 12))):
        if page is not None and draw(st.booleans()):
            page += draw(st.integers(0, 2))
        if draw(st.integers(0, 4)) == 0:
            heading = draw(st.text(alphabet="ABC xyz 12.", min_size=0, max_size=20))
            level = draw(st.integers(0, 6))
            blocks.append(Block(heading, BlockKind.HEADING, level, page))
        else:
            kind = draw(st.sampled_from([BlockKind.PARAGRAPH, BlockKind.CODE, BlockKind.LIST]))
            blocks.append(Block(draw(texts), kind, 0, page))
    return blocks


def section_ids(blocks: Sequence[Block]) -> list[int | None]:
    """Number sections independently of the chunker: a heading after body opens the next one."""
    ids: list[int | None] = []
    section, previous_was_body = 0, False
    for block in blocks:
        if not block.text.strip():
            ids.append(None)
            continue
        is_heading = block.kind is BlockKind.HEADING
        if is_heading and previous_was_body:
            section += 1
        previous_was_body = not is_heading
        ids.append(section)
    return ids


def check_invariants(
    blocks: list[Block], chunks: list[Chunk], size: int, overlap: int, length: LengthFunction
) -> None:
    full, starts = join_blocks(blocks)
    ids = section_ids(blocks)
    block_spans = [(s, s + len(b.text)) for b, s in zip(blocks, starts, strict=True)]

    def blocks_in(start: int, end: int) -> list[int]:
        return [
            i
            for i, (s, e) in enumerate(block_spans)
            if s < end and start < e and ids[i] is not None
        ]

    body = [i for i, b in enumerate(blocks) if b.kind is not BlockKind.HEADING and b.text.strip()]
    if not body:
        assert chunks == []
        return
    # (b) exact, stripped, non-empty text; indices in order.
    for number, chunk in enumerate(chunks):
        assert chunk.index == number
        assert chunk.text == full[chunk.start : chunk.end]
        assert chunk.text and chunk.text == chunk.text.strip()
    # (a) every non-whitespace character up to the last body block is in some chunk.
    covered = bytearray(len(full) + 1)
    for chunk in chunks:
        covered[chunk.start : chunk.end] = b"\x01" * (chunk.end - chunk.start)
    last = block_spans[body[-1]][1]
    missing = [i for i in range(last) if not covered[i] and not full[i].isspace()]
    assert not missing, f"uncovered characters at {missing[:5]}"
    # (c) size bound: only a single character may exceed (never with chars or WordPiece).
    for chunk in chunks:
        assert length(chunk.text) <= size or len(chunk.text) == 1, chunk
    for previous, current in zip(chunks, chunks[1:], strict=False):
        # (d) order, progress, and overlap only within a section and within the budget.
        assert previous.start < current.start and previous.end < current.end
        if current.start < previous.end:
            assert length(full[current.start : previous.end]) <= overlap
            assert previous.headings == current.headings
    for chunk in chunks:
        inside = blocks_in(chunk.start, chunk.end)
        # (e) one section per chunk; a heading inside starts the chunk or follows only headings.
        assert len({ids[i] for i in inside}) == 1
        for i in inside:
            if blocks[i].kind is BlockKind.HEADING and chunk.start < block_spans[i][0]:
                before = blocks_in(chunk.start, block_spans[i][0])
                assert all(blocks[j].kind is BlockKind.HEADING for j in before)
        # pages come from the blocks the chunk overlaps
        pages = [page for i in inside if (page := blocks[i].page) is not None]
        assert (chunk.page_start, chunk.page_end) == (
            (min(pages), max(pages)) if pages else (None, None)
        )
        # never starts mid-word, unless the word alone is too long or follows CJK punctuation
        if chunk.start > 0 and not full[chunk.start - 1].isspace():
            if full[chunk.start - 1] not in CJK_ENDS:
                head = re.search(r"\S*\Z", full[: chunk.start])
                tail = re.match(r"\S*", full[chunk.start :])
                assert head is not None and tail is not None  # both match the empty string
                word = head.group() + tail.group()
                assert length(word) > size, (word, chunk)


@given(blocks=block_lists(), size=st.integers(20, 400), data=st.data())
@settings(max_examples=300, deadline=None)
def test_invariants_in_characters(blocks: list[Block], size: int, data: st.DataObject) -> None:
    overlap = data.draw(st.integers(0, size // 2))
    chunks = chunk_document(blocks, chunk_size=size, chunk_overlap=overlap)
    check_invariants(blocks, chunks, size, overlap, char_length)
    # (f) deterministic
    assert chunk_document(blocks, chunk_size=size, chunk_overlap=overlap) == chunks


@pytest.fixture(scope="module")
def minilm() -> TokenCounter:
    return TokenCounter()


@given(blocks=block_lists(), size=st.integers(4, 120), data=st.data())
@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
def test_invariants_in_tokens(
    minilm: TokenCounter, blocks: list[Block], size: int, data: st.DataObject
) -> None:
    overlap = data.draw(st.integers(0, size // 2))
    chunks = chunk_document(blocks, chunk_size=size, chunk_overlap=overlap, length=minilm)
    check_invariants(blocks, chunks, size, overlap, minilm)
    assert chunk_document(blocks, chunk_size=size, chunk_overlap=overlap, length=minilm) == chunks


@pytest.fixture(scope="module")
def byte_level(corpus_dir: Path) -> TokenCounter:
    """A real byte-level BPE tokenizer (trained here on an RFC): its words carry their space."""
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    trainer = trainers.BpeTrainer(
        vocab_size=600, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False
    )
    rfc = (corpus_dir / "txt" / "rfc6455-websocket.txt").read_text(encoding="utf-8")
    tokenizer.train_from_iterator([rfc], trainer)
    return TokenCounter.from_tokenizer(tokenizer)


@given(blocks=block_lists(), size=st.integers(4, 120), data=st.data())
@settings(
    max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
def test_size_bound_holds_for_a_tokenizer_whose_counts_do_not_add_up(
    byte_level: TokenCounter, blocks: list[Block], size: int, data: st.DataObject
) -> None:
    overlap = data.draw(st.integers(0, size // 2))
    chunks = chunk_document(blocks, chunk_size=size, chunk_overlap=overlap, length=byte_level)
    full = join_blocks(blocks)[0]
    for chunk in chunks:
        assert chunk.text == full[chunk.start : chunk.end]
        assert byte_level(chunk.text) <= size or len(chunk.text) == 1
    for previous, current in zip(chunks, chunks[1:], strict=False):
        assert previous.start < current.start and previous.end < current.end


# --- real documents --------------------------------------------------------------------------


def paragraphs(path: Path, encoding: str = "utf-8") -> list[Block]:
    """Blocks of a plain-text file: its blank-line separated paragraphs, lines stripped."""
    text = path.read_text(encoding=encoding)
    parts = (re.sub(r"[ \t]+", " ", p).strip() for p in re.split(r"\n[ \t]*\n", text))
    return [Block("\n".join(line.strip() for line in p.splitlines())) for p in parts if p]


def test_rfc_chunks_end_at_sentence_or_paragraph_ends(corpus_dir: Path) -> None:
    blocks = paragraphs(corpus_dir / "txt" / "rfc6455-websocket.txt")
    full = join_blocks(blocks)[0]
    chunks = chunk_document(blocks, chunk_size=1000, chunk_overlap=150)
    check_invariants(blocks, chunks, 1000, 150, char_length)

    def at_paragraph_end(chunk: Chunk) -> bool:
        return re.match(r"\s*\n\s*\n|\s*\Z", full[chunk.end :]) is not None

    def at_sentence_end(chunk: Chunk) -> bool:
        return chunk.text[-1] in ".!?:"

    clean = [c for c in chunks if at_paragraph_end(c) or at_sentence_end(c)]
    # The rest end at a line end of a table or of the table of contents.
    assert len(clean) / len(chunks) >= 0.95
    assert all(c in clean or full[c.end] == "\n" for c in chunks)
    assert all(c.start == 0 or full[c.start - 1].isspace() for c in chunks)
    assert max(len(c.text) for c in chunks) <= 1000
    # A sentence the RFC holds (hard-wrapped across two lines), found whole in one chunk.
    sentence = "The WebSocket Protocol enables two-way communication between a client\nrunning"
    assert any(sentence in c.text for c in chunks)


def test_cjk_text_splits_after_full_stops(corpus_dir: Path) -> None:
    # A hard-wrapped Japanese paragraph: lines break mid-sentence, sentences end with 。
    path = corpus_dir / "txt" / "shift_jis-gutenberg-luther-catechism-ja.txt"
    text = path.read_text(encoding="shift_jis")
    paragraph = next(
        p for p in re.split(r"\n\s*\n", text) if "イエス・キリストこそ私の主です。" in p
    )
    assert max(len(sentence) for sentence in paragraph.split("。")) < 80
    chunks = chunk_text(paragraph.strip(), chunk_size=80, chunk_overlap=30)
    assert len(chunks) >= 5
    assert all(chunk.text.endswith("。") for chunk in chunks)  # never at the line breaks
    # The overlap is the previous chunk's last sentence.
    assert chunks[1].text.endswith("イエス・キリストこそ私の主です。イエスは\n私をあがないました。")
    assert chunks[2].text.startswith("イエスは\n私をあがないました。私は道に迷い")


def test_token_budget_with_minilm(corpus_dir: Path, minilm: TokenCounter) -> None:
    blocks = paragraphs(corpus_dir / "txt" / "rfc6455-websocket.txt")
    chunks = chunk_document(blocks, chunk_size=128, chunk_overlap=16, length=minilm)
    counts = minilm.batch([c.text for c in chunks])
    assert max(counts) <= 128
    assert sorted(counts)[len(counts) // 2] >= 64  # chunks are filled, not shredded
    check_invariants(blocks, chunks, 128, 16, minilm)


def test_heading_paths_follow_levels() -> None:
    heading = BlockKind.HEADING
    blocks = [
        Block("Guide", heading, 1),
        Block("An introduction."),
        Block("Install", heading, 2),
        Block("Linux", heading, 3),
        Block("Run apt-get install docingest."),
        Block("Usage", heading, 2),
        Block("Run it."),
        Block("Appendix", heading, 1),
        Block("More."),
        Block("Orphan heading", heading, 2),
    ]
    chunks = chunk_document(blocks, chunk_size=200, chunk_overlap=20)
    assert [c.headings for c in chunks] == [
        ("Guide",),
        ("Guide", "Install", "Linux"),
        ("Guide", "Usage"),
        ("Appendix",),
    ]
    assert [c.text for c in chunks] == [
        "Guide\n\nAn introduction.",
        "Install\n\nLinux\n\nRun apt-get install docingest.",
        "Usage\n\nRun it.",
        "Appendix\n\nMore.",
    ]


def test_pages_across_a_page_change() -> None:
    blocks = [
        Block("First page, first paragraph.", page=1),
        Block("First page, second paragraph.", page=1),
        Block("Second page, first paragraph.", page=2),
        Block("Second page, second paragraph.", page=2),
    ]
    chunks = chunk_document(blocks, chunk_size=70, chunk_overlap=0)
    assert [(c.text, c.page_start, c.page_end) for c in chunks] == [
        ("First page, first paragraph.\n\nFirst page, second paragraph.", 1, 1),
        ("Second page, first paragraph.\n\nSecond page, second paragraph.", 2, 2),
    ]
    wide = chunk_document(blocks, chunk_size=100, chunk_overlap=0)
    assert [(c.page_start, c.page_end) for c in wide] == [(1, 2), (2, 2)]
    assert (
        chunk_document([Block("No pages here.")], chunk_size=50, chunk_overlap=0)[0].page_start
        is None
    )


def test_sentences_are_not_cut_at_abbreviations_or_decimals() -> None:
    text = "Dr. Watson met Mr. Holmes at 3.14 pm. They spoke e.g. about crime. It was late."
    chunks = chunk_text(text, chunk_size=40, chunk_overlap=0)
    assert [c.text for c in chunks] == [
        "Dr. Watson met Mr. Holmes at 3.14 pm.",
        "They spoke e.g. about crime.",
        "It was late.",
    ]
    # A number opening a line is a list item, not the end of a sentence; a list splits by lines.
    steps = "1. Open the box and take the unit out. Then plug it in.\n2. Done."
    assert [c.text for c in chunk_text(steps, chunk_size=40, chunk_overlap=0)] == [
        "1. Open the box and take the unit out.",
        "Then plug it in.\n2. Done.",
    ]


def test_lists_and_code_split_at_lines_prose_at_sentences() -> None:
    items = "\n".join(f"- Item {n} does one thing. It also does another." for n in range(8))
    prose = "\n".join(
        ["A hard-wrapped sentence that runs on across", "two lines. Then another", "one ends here."]
        * 4
    )
    for blocks in (
        [Block(items)],
        [Block(items, BlockKind.LIST)],
        [Block("x = 1. y\n" * 30, BlockKind.CODE)],
    ):
        chunks = chunk_document(blocks, chunk_size=120, chunk_overlap=30)
        full = blocks[0].text
        assert len(chunks) > 1
        assert all(c.end == len(full) or full[c.end] == "\n" for c in chunks)  # at line ends
        assert all(c.start == 0 or full[c.start - 1] == "\n" for c in chunks)  # overlap too
    chunks = chunk_text(prose, chunk_size=120, chunk_overlap=30)
    assert all(c.text.endswith(".") for c in chunks)


def test_overlap_starts_at_a_sentence() -> None:
    text = "One two three. Four five six. Seven eight nine. Ten eleven twelve."
    chunks = chunk_text(text, chunk_size=50, chunk_overlap=20)
    assert [c.text for c in chunks] == [
        "One two three. Four five six. Seven eight nine.",
        "Seven eight nine. Ten eleven twelve.",
    ]


def test_repeated_passages_get_their_own_offsets() -> None:
    paragraph = "The same paragraph, repeated word for word to fool str.find."
    text = "\n\n".join([paragraph] * 6)
    chunks = chunk_text(text, chunk_size=130, chunk_overlap=0)
    assert [c.start for c in chunks] == [0, 124, 248]
    assert all(c.text == text[c.start : c.end] for c in chunks)


def test_an_unbreakable_word_is_cut_by_characters() -> None:
    url = "https://example.com/" + "a1b2c3" * 500
    chunks = chunk_text(f"See {url} for details.", chunk_size=100, chunk_overlap=30)
    assert max(len(c.text) for c in chunks) <= 100
    assert "".join(c.text for c in chunks[1:-1]) in url
    assert chunks[-1].text.endswith("for details.")


def test_nothing_to_chunk() -> None:
    heading = BlockKind.HEADING
    assert chunk_document([], chunk_size=100, chunk_overlap=10) == []
    assert (
        chunk_document(
            [Block("Title", heading, 1), Block("Sub", heading, 2)], chunk_size=100, chunk_overlap=0
        )
        == []
    )
    assert chunk_text(" \n\n\t ", chunk_size=100, chunk_overlap=0) == []
    assert chunk_document([Block("  "), Block("")], chunk_size=10, chunk_overlap=0) == []


def test_a_sections_chunks_come_out_before_later_blocks_are_read() -> None:
    heading = BlockKind.HEADING
    document = [
        Block("Part one", heading, 1, page=1),
        Block("First paragraph of part one, long enough to be cut in two.", page=1),
        Block("Second paragraph of part one.", page=2),
        Block("Part two", heading, 1, page=3),
        Block("Part two's only paragraph.", page=3),
    ]
    read: list[int] = []

    def extracted() -> Iterator[Block]:
        for number, block in enumerate(document):
            read.append(number)
            yield block

    chunks = iter_chunks(extracted(), chunk_size=40, chunk_overlap=10)
    first = next(chunks)
    assert read == [0, 1, 2, 3]  # the next heading closed part one; part two's body unread
    assert first.headings == ("Part one",) and first.page_start == 1
    rest = list(chunks)
    assert read == [0, 1, 2, 3, 4]
    whole = chunk_document(document, chunk_size=40, chunk_overlap=10)
    assert [first, *rest] == whole and len(whole) >= 4
    full_text, _ = join_blocks(document)
    assert all(full_text[c.start : c.end] == c.text for c in whole)
    assert whole[-1].headings == ("Part two",) and whole[-1].page_end == 3


@pytest.mark.parametrize(("size", "overlap"), [(0, 0), (10, 10), (10, -1)])
def test_bad_sizes_are_refused(size: int, overlap: int) -> None:
    with pytest.raises(ValueError, match="chunk_size must be positive"):
        chunk_text("text", chunk_size=size, chunk_overlap=overlap)


def _table(rows: int) -> Block:
    lines = ["Name | Size | Description"]
    lines += [f"item{n} | {n * 7} bytes | row number {n} of the table" for n in range(rows)]
    return Block("\n".join(lines), BlockKind.TABLE)


def test_table_rows_are_never_split_and_continued_chunks_carry_the_header() -> None:
    blocks = [Block("Types", BlockKind.HEADING, level=1), Block("Intro text."), _table(400)]
    text, _ = join_blocks(blocks)
    rows = set(blocks[2].text.split("\n"))
    chunks = chunk_document(blocks, chunk_size=300, chunk_overlap=60)
    assert len(chunks) > 10
    for chunk in chunks:
        assert text[chunk.start : chunk.end] == chunk.text  # offsets stay exact slices
        inside = chunk.text.split("\n")
        if chunk.start >= text.index("item0"):
            assert all(line in rows for line in inside), inside  # whole rows only
            assert chunk.table_header == "Name | Size | Description"
            assert "Name | Size" not in chunk.text  # beside the text, not in it
    assert chunks[0].table_header == ""  # the first chunk holds the header itself


def test_a_row_longer_than_a_chunk_is_the_only_one_cut() -> None:
    long_row = "long | " + "word " * 200
    block = Block("A | B\nshort | row\n" + long_row.strip() + "\nafter | row", BlockKind.TABLE)
    chunks = chunk_document([block], chunk_size=200, chunk_overlap=0)
    texts = [chunk.text for chunk in chunks]
    for row in ("A | B", "short | row", "after | row"):  # whole, in some chunk
        assert any(row in text.split("\n") for text in texts), row
    # The long row alone is cut, into pieces no longer than a chunk.
    assert len(chunks) > 5
    assert all(len(text) <= 200 for text in texts)
