"""Compare the chunker with langchain's RecursiveCharacterTextSplitter on real corpus texts.

Run: .venv/bin/python bench/bench_chunking.py [--runs N] [--token-runs N]

Both splitters run in the same process, interleaved, on the same decoded text: langchain on
the raw string (`create_documents` with `add_start_index=True`), ours on its blank-line
paragraphs as blocks (what an extractor hands over). "MB/s" times the splitting alone; "incl.
paragraph split" adds cutting the raw string into `Block`s, so both start from the same
string. Speeds are medians. Quality is measured on each splitter's own text and offsets:

- ends clean: the chunk ends at a sentence end (. ! ? … 。！？ plus closing quotes) or a
  paragraph end (a blank line or the end of the text follows);
- ends at a line end: clean, or a line break follows (list items, table rows, code lines);
- mid-word: the chunk starts (or ends) between two letters or digits;
- offsets exact: `text[start:start + len(chunk)] == chunk` (langchain recovers `start_index`
  with `str.find`; ours are computed while splitting);
- min/p50/p95/max: chunk sizes in the unit of the run (characters or tokens).
"""

from __future__ import annotations

import argparse
import re
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from langchain_text_splitters import RecursiveCharacterTextSplitter

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from _common import find_corpus, machine

from docingest.pipeline.chunking import chunk_document
from docingest.pipeline.chunking.tokens import LengthFunction, TokenCounter, char_length
from docingest.pipeline.document import Block, join_blocks

FILES = [
    "txt/gutenberg-war-and-peace.txt",
    "txt/rfc2616-http11.txt",
    "txt/jargon-file-4.4.7.txt",
    "txt/debian-reference.en.txt",
    "markdown/ragflow-http_api_reference.md",
    "markdown/httpx-CHANGELOG.md",
    "markdown/llm-usage.md",
]

_PARAGRAPH_BREAK = re.compile(r"\n[ \t\f\v\r]*\n")
_SENTENCE_END = re.compile(r"[.!?…。！？][\"'”’)\]」』）]*\Z")
_PARAGRAPH_END = re.compile(r"\s*\n\s*\n|\s*\Z")
_LINE_END = re.compile(r"[^\S\n]*(?:\n|\Z)")


@dataclass
class Result:
    text: str  # the text the offsets point into
    spans: list[tuple[int, str]]  # (start, chunk text)


def paragraph_blocks(text: str) -> list[Block]:
    """What an extractor hands the chunker for a plain text: its blank-line paragraphs."""
    return [Block(p.strip()) for p in _PARAGRAPH_BREAK.split(text) if p.strip()]


def quality(result: Result, length: Callable[[str], int]) -> dict[str, float]:
    text, spans = result.text, result.spans
    clean = line_end = mid_start = mid_end = exact = 0
    for start, chunk in spans:
        end = start + len(chunk)
        if start >= 0 and text[start:end] == chunk:
            exact += 1
        if _SENTENCE_END.search(chunk) or _PARAGRAPH_END.match(text, end):
            clean += 1
            line_end += 1
        elif _LINE_END.match(text, end):
            line_end += 1
        if start > 0 and (text[start - 1] + chunk[:1]).isalnum():
            mid_start += 1
        if end < len(text) and (chunk[-1:] + text[end : end + 1]).isalnum():
            mid_end += 1
    sizes = sorted(length(chunk) for _, chunk in spans)
    count = len(spans)
    return {
        "count": count,
        "clean": 100 * clean / count,
        "line_end": 100 * line_end / count,
        "mid_start": 100 * mid_start / count,
        "mid_end": 100 * mid_end / count,
        "exact": 100 * exact / count,
        "min": sizes[0],
        "p50": sizes[count // 2],
        "p95": sizes[min(count - 1, int(count * 0.95))],
        "max": sizes[-1],
    }


def seconds(function: Callable[[], object]) -> float:
    started = time.perf_counter()
    function()
    return time.perf_counter() - started


def compare(
    text: str,
    runs: int,
    splitter: RecursiveCharacterTextSplitter,
    size: int,
    overlap: int,
    length: LengthFunction,
    count: Callable[[str], int],
) -> list[str]:
    """Time both splitters interleaved (so load on the machine hits both alike); two rows."""
    blocks = paragraph_blocks(text)
    ours_times, split_times, theirs_times = [], [], []
    for _ in range(runs):
        split_times.append(seconds(lambda: paragraph_blocks(text)))
        ours_times.append(
            seconds(
                lambda: chunk_document(
                    blocks, chunk_size=size, chunk_overlap=overlap, length=length
                )
            )
        )
        theirs_times.append(seconds(lambda: splitter.create_documents([text])))
    chunks = chunk_document(blocks, chunk_size=size, chunk_overlap=overlap, length=length)
    ours = Result(join_blocks(blocks)[0], [(c.start, c.text) for c in chunks])
    documents = splitter.create_documents([text])
    theirs = Result(text, [(d.metadata["start_index"], d.page_content) for d in documents])
    megabytes = len(text.encode("utf-8")) / 1e6
    ours_time, split_time = statistics.median(ours_times), statistics.median(split_times)
    theirs_time = statistics.median(theirs_times)
    return [
        row(
            "docingest",
            megabytes / ours_time,
            megabytes / (ours_time + split_time),
            quality(ours, count),
        ),
        row("langchain", megabytes / theirs_time, megabytes / theirs_time, quality(theirs, count)),
    ]


HEADER = (
    "| file | splitter | MB/s | MB/s incl. paragraph split | chunks | ends clean % "
    "| ends at a line end % | starts mid-word % | ends mid-word % | offsets exact % "
    "| min | p50 | p95 | max |\n"
    "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
)


def row(splitter: str, speed: float, speed_with_split: float, q: dict[str, float]) -> str:
    return (
        f"| {splitter} | {speed:.1f} | {speed_with_split:.1f} | {q['count']:.0f} "
        f"| {q['clean']:.1f} | {q['line_end']:.1f} | {q['mid_start']:.1f} "
        f"| {q['mid_end']:.1f} | {q['exact']:.1f} "
        f"| {q['min']:.0f} | {q['p50']:.0f} | {q['p95']:.0f} | {q['max']:.0f} |"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=15, help="runs per splitter, characters")
    parser.add_argument("--token-runs", type=int, default=3, help="runs per splitter, tokens")
    args = parser.parse_args()
    corpus = find_corpus()
    texts = {Path(f).name: (corpus / f).read_text(encoding="utf-8") for f in FILES}
    print(machine())

    print(f"\n### Characters: chunk_size=1000, chunk_overlap=150, median of {args.runs} runs\n")
    print(HEADER)
    splitter = RecursiveCharacterTextSplitter(
        chunk_size=1000, chunk_overlap=150, add_start_index=True
    )
    for name, text in texts.items():
        for line in compare(text, args.runs, splitter, 1000, 150, char_length, len):
            print(f"| {name} {line}", flush=True)

    counter = TokenCounter()
    tokenizer = counter.tokenizer

    def count_tokens(text: str) -> int:
        return len(tokenizer.encode(text, add_special_tokens=False).ids)

    token_splitter = RecursiveCharacterTextSplitter(
        chunk_size=256, chunk_overlap=32, length_function=count_tokens, add_start_index=True
    )
    print(
        "\n### Tokens (all-MiniLM-L6-v2 WordPiece): chunk_size=256, chunk_overlap=32, "
        f"median of {args.token_runs} runs\n"
    )
    print(HEADER)
    for name, text in texts.items():
        for line in compare(text, args.token_runs, token_splitter, 256, 32, counter, count_tokens):
            print(f"| {name} {line}", flush=True)


if __name__ == "__main__":
    main()
