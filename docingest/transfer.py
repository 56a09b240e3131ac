"""`docingest export` and `docingest import`: move an index between stores without
re-embedding, e.g. from the embedded store to a Qdrant server.

Both open the store their settings name, so the embedded store must not be in use by a running
`docingest serve` (its directory has one owner). See docs/guides/stores.md, "When a Qdrant
server is the better choice".
"""

from __future__ import annotations

import argparse
import contextlib
import shutil
import sys
import tempfile
from collections.abc import Callable, Iterator
from functools import partial
from pathlib import Path
from typing import IO, Any

from docingest.commands import SERVICE
from docingest.pipeline.errors import IngestError
from docingest.pipeline.settings import Settings


def add_transfer_commands(commands: Any) -> None:
    export = commands.add_parser(
        "export", help="write an index's config and live points to a file (JSON Lines)"
    )
    export.add_argument("index")
    export.add_argument("file", type=Path, help="where to write ('-' for standard output)")
    export.set_defaults(handler=_export, extra=SERVICE)
    load = commands.add_parser(
        "import", help="create an index from an exported file in the configured store"
    )
    load.add_argument("file", type=Path, help="an exported file ('-' for standard input)")
    load.add_argument("--index", help="the new index's name (default: the exported one)")
    load.add_argument(
        "--merge",
        action="store_true",
        help="add the file's points to an index that exists already (same settings)",
    )
    load.set_defaults(handler=_import, extra=SERVICE)


def _export(args: argparse.Namespace, settings: Settings) -> int:
    from docingest.pipeline.store import VectorStore
    from docingest.pipeline.store.transfer import export_index

    try:
        with VectorStore.open(settings) as store:
            if str(args.file) == "-":
                count = export_index(store, args.index, sys.stdout)
            else:
                with open(args.file, "w", encoding="utf-8") as out:
                    count = export_index(store, args.index, out)
    except IngestError as exc:
        print(f"docingest export: {exc.code}: {exc.message}", file=sys.stderr)
        return 1
    print(f"exported {count} points of index '{args.index}'", file=sys.stderr)
    return 0


def _import(args: argparse.Namespace, settings: Settings) -> int:
    from docingest.pipeline.store import VectorStore
    from docingest.pipeline.store.transfer import import_index

    try:
        with contextlib.ExitStack() as stack:
            source: Callable[[], Iterator[str]] = partial(_file_lines, args.file)
            if str(args.file) == "-":  # read twice: checked whole before anything is written
                spool = stack.enter_context(tempfile.TemporaryFile("w+", encoding="utf-8"))
                shutil.copyfileobj(sys.stdin, spool)
                source = partial(_spooled_lines, spool)

            store = stack.enter_context(VectorStore.open(settings))
            name, count = import_index(store, source, index=args.index, merge=args.merge)
    except IngestError as exc:
        print(f"docingest import: {exc.code}: {exc.message}", file=sys.stderr)
        return 1
    except (OSError, UnicodeDecodeError) as exc:
        print(f"docingest import: cannot read {args.file}: {exc}", file=sys.stderr)
        return 1
    print(f"imported {count} points into index '{name}'", file=sys.stderr)
    return 0


def _file_lines(path: Path) -> Iterator[str]:
    with open(path, encoding="utf-8") as lines:
        yield from lines


def _spooled_lines(spool: IO[str]) -> Iterator[str]:
    spool.seek(0)
    # Through iter(): `yield from spool` closes the spool when this generator is closed
    # (PEP 380), and the import reads the header alone first.
    yield from iter(spool.readline, "")
