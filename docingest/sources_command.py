"""`docingest sources put|list|show|sync|runs|cancel|delete`: manage an index's sources on the
service (buckets, websites and server folders it keeps the index in sync with).

Unlike `docingest sync DIR`, which uploads a folder of this machine, a source lives on the
service: it runs there on its schedule, and these commands only set it up and look at it.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.table import Table

from docingest import Client, DocingestError
from docingest.commands import client_for, connection_options, console, fail, show
from docingest.models import SourceInfo, SourceRun

if TYPE_CHECKING:
    from docingest.pipeline.settings import Settings

ENDED = ("completed", "failed", "cancelled")
UNDER_WAY = ("queued", "running", "cancelling")


def _json_or_file(raw: str) -> dict[str, Any]:
    """A JSON object, or `@path` to a file holding one (keeps secrets out of the shell's
    history)."""
    text = Path(raw[1:]).read_text(encoding="utf-8") if raw.startswith("@") else raw
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise argparse.ArgumentTypeError(f"not valid JSON ({exc.msg})") from exc
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError("must be a JSON object")
    return value


def add_sources_command(commands: Any) -> None:
    sources = commands.add_parser(
        "sources", help="manage an index's sources (S3 buckets, websites, server folders)"
    )
    actions = sources.add_subparsers(dest="action", required=True)

    put = actions.add_parser("put", help="create or change a source")
    _index_and_name(put)
    put.add_argument("--type", required=True, help="s3, web or folder")
    put.add_argument(
        "--config", required=True, type=_json_or_file, help="JSON object, or @file.json"
    )
    put.add_argument("--every", help='run on a schedule, e.g. "15m", "1h", "1d"')
    put.add_argument("--no-prune", action="store_true", help="never delete vanished items")
    put.add_argument("--metadata", type=_json_or_file, help="JSON object put on every document")
    put.set_defaults(handler=_put)

    listing = actions.add_parser("list", help="an index's sources and their last runs")
    listing.add_argument("index")
    connection_options(listing)
    listing.set_defaults(handler=_list)

    shown = actions.add_parser("show", help="one source as JSON (secrets as ***)")
    _index_and_name(shown)
    shown.set_defaults(handler=_show)

    sync = actions.add_parser("sync", help="run a source now")
    _index_and_name(sync)
    sync.add_argument("--wait", action="store_true", help="wait for the run to end")
    sync.set_defaults(handler=_sync)

    runs = actions.add_parser("runs", help="a source's runs, newest first")
    _index_and_name(runs)
    runs.add_argument("--limit", type=int, default=20)
    runs.set_defaults(handler=_runs)

    cancel = actions.add_parser("cancel", help="stop a source's run under way")
    _index_and_name(cancel)
    cancel.add_argument("run_id", nargs="?", help="the run to stop (default: the one under way)")
    cancel.add_argument("--wait", action="store_true", help="wait for the run to end")
    cancel.set_defaults(handler=_cancel)

    delete = actions.add_parser("delete", help="remove a source")
    _index_and_name(delete)
    delete.add_argument(
        "--delete-documents", action="store_true", help="also delete the documents it brought"
    )
    delete.set_defaults(handler=_delete)


def _index_and_name(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("index")
    parser.add_argument("name")
    connection_options(parser)


def _put(args: argparse.Namespace, settings: Settings) -> int:
    with client_for(args, settings) as client:
        try:
            source = client.put_source(
                args.index,
                args.name,
                args.type,
                args.config,
                every=args.every,
                prune=False if args.no_prune else None,
                metadata=args.metadata,
            )
        except DocingestError as exc:
            return fail(exc)
    print(json.dumps(source.to_json(), indent=2))  # noqa: T201
    return 0


def _list(args: argparse.Namespace, settings: Settings) -> int:
    with client_for(args, settings) as client:
        try:
            sources = client.list_sources(args.index)
        except DocingestError as exc:
            return fail(exc)
    table = Table("name", "type", "every", "state", "last run", "counts", "next run")
    for source in sources:
        run = source.last_run
        table.add_row(
            source.name,
            source.type,
            source.schedule.every if source.schedule else "-",
            source.state,
            _run_status(run) if run else "-",
            _counts(run) if run else "",
            source.next_run_at or "-",
        )
    show(console(), table)
    return 0


def _show(args: argparse.Namespace, settings: Settings) -> int:
    with client_for(args, settings) as client:
        try:
            source: SourceInfo = client.get_source(args.index, args.name)
        except DocingestError as exc:
            return fail(exc)
    print(json.dumps(source.to_json(), indent=2))  # noqa: T201
    return 0


def _sync(args: argparse.Namespace, settings: Settings) -> int:
    with client_for(args, settings) as client:
        try:
            run = client.sync_source(args.index, args.name)
            run = _wait_for_end(client, args, run) if args.wait else run
        except DocingestError as exc:
            return fail(exc)
    print(f"{run.run_id} {_run_status(run)} {_counts(run)}")  # noqa: T201
    return 0 if run.status != "failed" else 1


def _runs(args: argparse.Namespace, settings: Settings) -> int:
    with client_for(args, settings) as client:
        try:
            runs = client.list_source_runs(args.index, args.name, limit=args.limit)
        except DocingestError as exc:
            return fail(exc)
    table = Table("run", "status", "started", "finished", "counts")
    for run in runs:
        table.add_row(
            run.run_id,
            _run_status(run),
            run.started_at or "-",
            run.finished_at or "-",
            _counts(run),
        )
    show(console(), table)
    return 0


def _cancel(args: argparse.Namespace, settings: Settings) -> int:
    with client_for(args, settings) as client:
        try:
            run_id = args.run_id
            if run_id is None:
                runs = client.list_source_runs(args.index, args.name, limit=1)
                if not runs or runs[0].status not in UNDER_WAY:
                    return fail(f"source {args.name} has no run under way")
                run_id = runs[0].run_id
            run = client.cancel_source_run(args.index, args.name, run_id)
            run = _wait_for_end(client, args, run) if args.wait else run
        except DocingestError as exc:
            return fail(exc)
    print(f"{run.run_id} {_run_status(run)} {_counts(run)}")  # noqa: T201
    return 0


def _wait_for_end(client: Client, args: argparse.Namespace, run: SourceRun) -> SourceRun:
    while run.status not in ENDED:
        time.sleep(1.0)
        runs = client.list_source_runs(args.index, args.name, limit=20)
        run = next((each for each in runs if each.run_id == run.run_id), run)
    return run


def _delete(args: argparse.Namespace, settings: Settings) -> int:
    with client_for(args, settings) as client:
        try:
            client.delete_source(args.index, args.name, delete_documents=args.delete_documents)
        except DocingestError as exc:
            return fail(exc)
    return 0


def _run_status(run: SourceRun) -> str:
    return f"{run.status} ({run.error.code})" if run.error else str(run.status)


def _counts(run: SourceRun) -> str:
    counts = run.counts
    return (
        f"listed {counts.listed}, new {counts.new}, changed {counts.changed}, unchanged "
        f"{counts.unchanged}, deleted {counts.deleted}, failed {counts.failed}"
    )
