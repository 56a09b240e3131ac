"""`docingest`: run the service (`serve`, `api`, `worker`), talk to it (`ingest`, `sync`,
`sources`, `search`, `status`, `eval`), serve it to agents (`mcp`), preview how files will be
cut before they are ingested (`inspect`), or move an index between stores (`export`,
`import`)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from docingest.commands import SERVICE, add_client_commands, connection_options, fail
from docingest.eval_command import add_eval_command
from docingest.folder_sync import add_sync_command
from docingest.mcp_command import add_mcp_command
from docingest.pipeline.log import configure_logging
from docingest.pipeline.settings import ChunkUnit, Settings, get_settings
from docingest.sources_command import add_sources_command
from docingest.transfer import add_transfer_commands


def _inspect(args: argparse.Namespace, settings: Settings) -> int:
    from docingest.inspect import run_inspect  # parsers load only for this command

    return run_inspect(args, settings)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="docingest", description=__doc__)
    connection_options(parser, subcommand=False)  # for ingest, search and status
    commands = parser.add_subparsers(dest="command", required=True)
    inspect = commands.add_parser(
        "inspect", help="show the detected format, metadata and chunks of local files"
    )
    inspect.add_argument("files", nargs="+", type=Path, help="files or folders")
    inspect.add_argument("--json", action="store_true", help="one JSON object per file")
    inspect.add_argument("--chunk-size", type=int, help="override DOCINGEST_CHUNK_SIZE")
    inspect.add_argument("--chunk-overlap", type=int, help="override DOCINGEST_CHUNK_OVERLAP")
    inspect.add_argument("--unit", choices=[unit.value for unit in ChunkUnit])
    inspect.set_defaults(handler=_inspect, extra=SERVICE)
    add_client_commands(commands)
    add_eval_command(commands)
    add_sync_command(commands)
    add_sources_command(commands)
    add_mcp_command(commands)
    add_transfer_commands(commands)

    serve = commands.add_parser(
        "serve", help="run the API and a worker in one process (the embedded default)"
    )
    _add_listen_options(serve)
    serve.add_argument(
        "--seed",
        type=Path,
        metavar="DIR",
        help="on first start (no 'examples' index yet), ingest DIR into 'examples' and print a "
        "sample search",
    )
    serve.set_defaults(handler=_serve, extra=SERVICE)

    api = commands.add_parser("api", help="run the HTTP API alone (workers run elsewhere)")
    _add_listen_options(api)
    api.set_defaults(handler=_api, extra=SERVICE)

    worker = commands.add_parser("worker", help="run a Celery worker for ingestion jobs")
    worker.add_argument(
        "--concurrency", type=int, help="jobs at once (DOCINGEST_WORKER_CONCURRENCY)"
    )
    worker.add_argument(
        "--pool",
        choices=["prefork", "threads", "solo"],
        help="default: threads with the embedded store, prefork with a Qdrant server",
    )
    worker.add_argument(
        "--max-tasks-per-child", type=int, help="recycle a pool process after this many jobs"
    )
    worker.add_argument("--loglevel", default="INFO")
    worker.set_defaults(handler=_worker, extra=SERVICE)
    return parser


def _add_listen_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--host", help="listen address (DOCINGEST_HOST, default 127.0.0.1)")
    parser.add_argument("--port", type=int, help="listen port (DOCINGEST_PORT, default 8000)")


def _with_listen(args: argparse.Namespace, settings: Settings) -> Settings:
    update = {name: getattr(args, name) for name in ("host", "port") if getattr(args, name)}
    return settings.model_copy(update=update) if update else settings


def _serve(args: argparse.Namespace, settings: Settings) -> int:
    from docingest.server import serve

    configure_logging("INFO")
    on_ready = None
    if args.seed is not None:
        from docingest.seed import seed_examples

        seed_dir = args.seed.resolve()

        def on_ready(base_url: str) -> None:
            seed_examples(base_url, seed_dir, keys=settings.api_keys)

    return serve(_with_listen(args, settings), on_ready=on_ready)


def _api(args: argparse.Namespace, settings: Settings) -> int:
    from docingest.server import run_api

    configure_logging("INFO")
    return run_api(_with_listen(args, settings))


def _worker(args: argparse.Namespace, settings: Settings) -> int:
    from docingest.server import run_worker

    configure_logging(args.loglevel)
    return run_worker(
        settings,
        concurrency=args.concurrency,
        pool=args.pool,
        max_tasks_per_child=args.max_tasks_per_child,
        loglevel=args.loglevel,
    )


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args.handler(args, get_settings()))
    except BrokenPipeError:  # output piped into `head` and the like
        sys.stderr.close()
        return 0
    except ModuleNotFoundError as exc:
        # A command that needs an extra (`extra=` on its parser) run from a lighter install:
        # `pip install docingest` is the client alone. A module of our own missing is a bug.
        extra = getattr(args, "extra", None)
        if extra is None or (exc.name or "").partition(".")[0] == "docingest":
            raise
        return fail(
            f"docingest {args.command} needs the {extra} extra: "
            f"pip install 'docingest[{extra}]' ({exc})",
            2,
        )
