"""`docingest export` and `docingest import`: move an index between stores without
re-embedding, e.g. from the embedded store to a Qdrant server.

Both open the store their settings name, so the embedded store must not be in use by a running
`docingest serve` (its directory has one owner). See the README, "Moving to a Qdrant server".
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from pipeline.errors import IngestError
from pipeline.settings import Settings


def add_transfer_commands(commands: Any) -> None:
    export = commands.add_parser(
        "export", help="write an index's config and live points to a file (JSON Lines)"
    )
    export.add_argument("index")
    export.add_argument("file", type=Path, help="where to write ('-' for standard output)")
    export.set_defaults(handler=_export)
    load = commands.add_parser(
        "import", help="create an index from an exported file in the configured store"
    )
    load.add_argument("file", type=Path, help="an exported file ('-' for standard input)")
    load.add_argument("--index", help="the new index's name (default: the exported one)")
    load.set_defaults(handler=_import)


def _export(args: argparse.Namespace, settings: Settings) -> int:
    from pipeline.store import VectorStore
    from pipeline.store.transfer import export_index

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
    from pipeline.store import VectorStore
    from pipeline.store.transfer import import_index

    try:
        with VectorStore.open(settings) as store:
            if str(args.file) == "-":
                name, count = import_index(store, sys.stdin, index=args.index)
            else:
                with open(args.file, encoding="utf-8") as lines:
                    name, count = import_index(store, lines, index=args.index)
    except (IngestError, ValueError) as exc:
        message = f"{exc.code}: {exc.message}" if isinstance(exc, IngestError) else str(exc)
        print(f"docingest import: {message}", file=sys.stderr)
        return 1
    print(f"imported {count} points into index '{name}'", file=sys.stderr)
    return 0
