"""`docingest inspect`: show how local files will be detected, extracted and cut into chunks."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from docingest.pipeline.chunking import ChunkingSpec
from docingest.pipeline.document import BlockKind
from docingest.pipeline.errors import IngestError
from docingest.pipeline.prepare import PreparedDocument, prepare_document
from docingest.pipeline.settings import ChunkUnit, Settings

PREVIEW_WORDS = 12
EXTRA_CHARS = 120


def _iter_files(paths: Sequence[Path]) -> Iterator[Path]:
    for path in paths:
        if path.is_dir():
            yield from sorted(p for p in path.rglob("*") if p.is_file())
        else:
            yield path


def _structure(prepared: PreparedDocument) -> dict[str, list[dict[str, Any]]]:
    """The headings (with levels) and tables the extractor found, in reading order."""
    headings, tables = [], []
    for block in prepared.document.blocks:
        if block.kind is BlockKind.HEADING:
            headings.append({"text": block.text, "level": block.level, "page": block.page})
        elif block.kind is BlockKind.TABLE:
            rows = block.text.split("\n")
            tables.append({"rows": len(rows), "first_row": rows[0], "page": block.page})
    return {"headings": headings, "tables": tables}


def _prepared_to_json(path: Path, prepared: PreparedDocument) -> dict[str, Any]:
    return {
        "filename": path.name,
        "format": str(prepared.detection.format),
        "metadata": prepared.metadata,
        "extra": prepared.document.extra,
        "structure": _structure(prepared),
        "chunks": [
            {
                "index": chunk.index,
                "text": chunk.text,
                "start": chunk.start,
                "end": chunk.end,
                "page_start": chunk.page_start,
                "page_end": chunk.page_end,
                "headings": list(chunk.headings),
                **({"table_header": chunk.table_header} if chunk.table_header else {}),
            }
            for chunk in prepared.chunks
        ],
    }


def _print_structure(prepared: PreparedDocument) -> None:
    """Print the headings as an indented outline and the tables' sizes."""
    structure = _structure(prepared)
    for heading in structure["headings"]:
        page = f" (p{heading['page']})" if heading["page"] is not None else ""
        indent = "  " * (max(heading["level"], 1) - 1)
        print(f"   H{heading['level']} {indent}{heading['text'][:EXTRA_CHARS]}{page}")
    for table in structure["tables"]:
        page = f" p{table['page']}" if table["page"] is not None else ""
        print(f"   table{page}, {table['rows']} rows: {table['first_row'][:EXTRA_CHARS]}")


def _print_human(path: Path, prepared: PreparedDocument) -> None:
    meta = prepared.metadata
    pages = f", {meta['pages']} pages" if meta["pages"] else ""
    print(
        f"== {path}  [{prepared.detection.format}{pages}, {meta['words']:,} words, "
        f"{len(prepared.chunks)} chunks]"
    )
    for key in ("title", "author", "language", "created", "modified", "sha256"):
        if meta.get(key):
            print(f"   {key}: {meta[key]}")
    for key, value in prepared.document.extra.items():  # e-mail headers, hidden sheets, ...
        shown = ", ".join(map(str, value)) if isinstance(value, list) else str(value)
        print(f"   {key}: {' '.join(shown.split())[:EXTRA_CHARS]}")  # a DOCX header has lines
    if meta.get("ocr"):
        pages_read = ", ".join(str(page) for page in meta["ocr"]["pages"])
        print(f"   ocr: pages {pages_read}, mean confidence {meta['ocr']['confidence']}")
    _print_structure(prepared)
    for chunk in prepared.chunks:
        pages_span = (
            f"p{chunk.page_start}"
            + (f"-{chunk.page_end}" if chunk.page_end != chunk.page_start else "")
            if chunk.page_start is not None
            else "-"
        )
        heading = " > ".join(chunk.headings)
        words = " ".join(chunk.text.split()[:PREVIEW_WORDS])
        print(f"  #{chunk.index:<4} [{chunk.start}:{chunk.end}] {pages_span:<9} {heading}")
        print(f"        {words}…")


def run_inspect(args: argparse.Namespace, settings: Settings) -> int:
    try:
        chunking = ChunkingSpec(
            chunk_size=args.chunk_size or settings.chunk_size,
            chunk_overlap=args.chunk_overlap
            if args.chunk_overlap is not None
            else settings.chunk_overlap,
            unit=ChunkUnit(args.unit) if args.unit else settings.chunk_unit,
        )
    except ValidationError as exc:
        print(f"error: {exc.errors()[0]['msg']}", file=sys.stderr)
        return 2
    failures = 0
    for path in _iter_files(args.files):
        try:
            data = path.read_bytes()
            prepared = prepare_document(
                data, filename=path.name, settings=settings, chunking=chunking
            )
        except IngestError as exc:
            failures += 1
            if args.json:
                print(
                    json.dumps({"filename": path.name, "error": exc.to_dict()}, ensure_ascii=False)
                )
            else:
                print(f"== {path}  FAILED {exc.code}: {exc.message}")
            continue
        except OSError as exc:
            failures += 1
            error = {"code": "unreadable_file", "message": f"Cannot read the file: {exc.strerror}."}
            if args.json:
                print(json.dumps({"filename": path.name, "error": error}, ensure_ascii=False))
            else:
                print(f"== {path}  FAILED {error['code']}: {error['message']}")
            continue
        if args.json:
            # default=str: front matter may hold dates, which JSON has no type for.
            print(json.dumps(_prepared_to_json(path, prepared), ensure_ascii=False, default=str))
        else:
            _print_human(path, prepared)
    return 1 if failures else 0
