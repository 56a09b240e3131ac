"""The client commands: `ingest` files, `search` an index, show a job's `status`.

They talk to a running service through the SDK (`docingest.Client`); progress goes to stderr
and results to stdout, as plain text when either is not a terminal.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.console import Console, RenderableType
from rich.progress import BarColumn, Progress, TaskID, TaskProgressColumn, TextColumn
from rich.table import Table
from rich.text import Text

from docingest import Client, DocingestError, batch
from docingest._core import default_base_url
from docingest.batch import Item
from docingest.models import Job, SearchResponse, SearchResult

if TYPE_CHECKING:
    from docingest.pipeline.settings import Settings

SERVICE = "service"
"""The extra that installs the service (`pip install 'docingest[service]'`): a command that needs
it says so in its parser's defaults (`extra=SERVICE`), and `docingest.cli.main` names it when
one of its modules is missing."""
PLAIN_WIDTH = 200
"""Line width when output is not a terminal (rich would otherwise wrap at 80)."""
SNIPPET_CHARS = 320


def console(*, stderr: bool = False) -> Console:
    """A console that writes plain, unwrapped-enough text when not on a terminal."""
    stream = sys.stderr if stderr else sys.stdout
    terminal = stream.isatty()
    return Console(
        file=stream,
        width=None if terminal else PLAIN_WIDTH,
        highlight=False,
        soft_wrap=not terminal,
    )


def show(out: Console, renderable: RenderableType) -> None:
    """Print `renderable`; off a terminal, without the padding rich adds to fill each line."""
    if out.is_terminal:
        out.print(renderable)
        return
    with out.capture() as captured:
        out.print(renderable)
    out.file.write("".join(line.rstrip() + "\n" for line in captured.get().splitlines()))


def _json_object(what: str) -> Any:
    def parse(raw: str) -> dict[str, Any]:
        try:
            value = json.loads(raw)
        except json.JSONDecodeError as exc:
            raise argparse.ArgumentTypeError(f"{what} is not valid JSON ({exc.msg})") from exc
        if not isinstance(value, dict):
            raise argparse.ArgumentTypeError(f'{what} must be a JSON object, like \'{{"k": "v"}}\'')
        return value

    return parse


def connection_options(parser: argparse.ArgumentParser, *, subcommand: bool = True) -> None:
    """Add `--url` and `--api-key`, accepted before the subcommand and after it alike.

    A subcommand's copy defaults to SUPPRESS, so it sets the value only when given and does
    not hide one given before the subcommand (`docingest --url URL ingest ...`, the form the
    seed's hints print).
    """
    default = argparse.SUPPRESS if subcommand else None
    parser.add_argument(
        "--url",
        default=default,
        help="the service (DOCINGEST_URL; default http://DOCINGEST_HOST:DOCINGEST_PORT)",
    )
    parser.add_argument(
        "--api-key", default=default, help="sent as a Bearer token (DOCINGEST_API_KEY)"
    )


def add_client_commands(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register `ingest`, `search` and `status` on the `docingest` parser."""
    ingest = commands.add_parser("ingest", help="upload files or folders and follow their jobs")
    ingest.add_argument("paths", nargs="+", type=Path, metavar="PATH", help="files or folders")
    ingest.add_argument("--index", default="default", help="target index (default: default)")
    ingest.add_argument(
        "--metadata", type=_json_object("--metadata"), help='JSON object, e.g. \'{"team": "a"}\''
    )
    ingest.add_argument("--document-id", help="the document's id (only with one file)")
    ingest.add_argument("--force", action="store_true", help="re-process unchanged content")
    ingest.add_argument("--no-wait", action="store_true", help="upload, print job ids, exit")
    connection_options(ingest)
    ingest.set_defaults(handler=_ingest)

    search = commands.add_parser("search", help="search an index")
    search.add_argument("query")
    search.add_argument("--index", default="default")
    search.add_argument("--mode", choices=["hybrid", "vector", "keyword"], default="hybrid")
    search.add_argument("--top-k", type=int, default=5)
    search.add_argument(
        "--filter", type=_json_object("--filter"), help='metadata filter, e.g. \'{"team": "a"}\''
    )
    search.add_argument("--max-chunks-per-document", type=int)
    search.add_argument("--json", action="store_true", help="print the response as JSON")
    connection_options(search)
    search.set_defaults(handler=_search)

    status = commands.add_parser("status", help="show an ingestion job")
    status.add_argument("job_id")
    status.add_argument("--json", action="store_true", help="print the job as JSON")
    connection_options(status)
    status.set_defaults(handler=_status)


def client_for(args: argparse.Namespace, settings: Settings) -> Client:
    """A client of `--url` (else DOCINGEST_URL, else where `serve` listens) with `--api-key`
    (else DOCINGEST_API_KEY)."""
    url = args.url or default_base_url(host=settings.host, port=settings.port)
    return Client(url, api_key=args.api_key or None)


def fail(problem: str | DocingestError, code: int = 1) -> int:
    """Print one line on stderr (a refused request with its code) and return `code`."""
    if isinstance(problem, DocingestError):
        problem = str(problem) if problem.status is not None else problem.message
    console(stderr=True).print(Text(f"docingest: {problem}", style="red"))
    return code


def _ingest(args: argparse.Namespace, settings: Settings) -> int:
    try:
        items = batch.collect(args.paths)
    except FileNotFoundError as exc:
        return fail(str(exc), 2)
    if not items:
        return fail("no files to ingest (hidden files are skipped)", 2)
    if args.document_id is not None:
        if len(items) != 1:
            return fail(f"--document-id needs exactly one file, not {len(items)}", 2)
        items[0].document_id = args.document_id
    with client_for(args, settings) as client:
        try:
            follow(
                client,
                items,
                index=args.index,
                metadata=args.metadata,
                force=args.force,
                wait=not args.no_wait,
            )
        except DocingestError as exc:
            return fail(exc)
        except KeyboardInterrupt:
            fail("interrupted; jobs already uploaded keep running (see `docingest status`)")
            return 130
    show(console(), summary_table(items, waited=not args.no_wait))
    return 1 if any(item.status == "failed" for item in items) else 0


def follow(client: Client, items: list[Item], **options: Any) -> None:
    """Run the batch with a progress bar per file on stderr (a line per file when no TTY)."""
    err = console(stderr=True)
    if not err.is_terminal:
        batch.run(client, items, on_change=lambda item: _log_finished(err, item), **options)
        return
    columns = (TextColumn("{task.description}"), BarColumn(), TaskProgressColumn())
    with Progress(*columns, console=err) as progress:
        tasks: dict[int, TaskID] = {
            id(item): progress.add_task(_describe(item), total=1.0) for item in items
        }

        def update(item: Item) -> None:
            progress.update(
                tasks[id(item)],
                completed=1.0 if item.finished else item.progress,
                description=_describe(item),
            )

        batch.run(client, items, on_change=update, **options)


def _describe(item: Item) -> str:
    state = item.stage or item.status
    if item.counts:
        state = f"{state}: {item.counts}"
    style = {"completed": "green", "failed": "red", "cancelled": "yellow"}.get(item.status, "cyan")
    return f"{Text(item.label).markup} [{style}]{state}[/]"


def _log_finished(err: Console, item: Item) -> None:
    if item.finished:
        err.print(Text(f"{item.name}: {item.status}"))


def summary_table(items: list[Item], *, waited: bool = True) -> Table:
    """One row per file, named by its document id: status, chunks, pages, embedding tokens, and
    what is worth knowing."""
    table = Table(show_edge=False, pad_edge=False)
    table.add_column("document", overflow="fold")  # a long id folds rather than push past 80
    table.add_column("status", no_wrap=True)
    if waited:
        table.add_column("chunks", justify="right", no_wrap=True)
        table.add_column("pages", justify="right", no_wrap=True)
        table.add_column("tokens", justify="right", no_wrap=True)
    table.add_column("note" if waited else "job")
    for item in items:
        style = {"completed": "green", "failed": "red"}.get(item.status, "yellow")
        row = [Text(item.name), Text(item.status, style=style)]
        if waited:
            result = item.result
            chunks = result.chunks if result is not None else None
            pages = result.pages if result is not None else None
            tokens = ((result.usage or {}) if result is not None else {}).get("input_tokens")
            row += [Text(_count(chunks)), Text(_count(pages)), Text(_count(tokens))]
        row.append(Text(_note(item, waited=waited)))
        table.add_row(*row)
    return table


def _count(value: object) -> str:
    return "-" if value is None else str(value)


def _note(item: Item, *, waited: bool) -> str:
    error = item.error
    if error is not None:
        return f"{error.code}: {error.message}"
    if not waited:
        return item.job_id or ""
    result = item.result
    if result is None:
        return ""
    if result.format_note:  # a text file named .pdf, read as text
        return result.format_note
    if result.unchanged:
        return "unchanged (already stored; --force re-processes it)"
    if result.chunks_reused:
        return f"{result.chunks_reused} chunks reused"
    return ""


def _search(args: argparse.Namespace, settings: Settings) -> int:
    with client_for(args, settings) as client:
        try:
            response = client.search(
                args.index,
                args.query,
                mode=args.mode,
                top_k=args.top_k,
                filter=args.filter,
                max_chunks_per_document=args.max_chunks_per_document,
            )
        except DocingestError as exc:
            return fail(exc)
    if args.json:
        print(json.dumps(response.to_json(), ensure_ascii=False, indent=2))
    else:
        print_results(console(), response, index=args.index, mode=args.mode)
    return 0


def print_results(
    out: Console, response: SearchResponse, *, index: str, mode: str, snippet: int = SNIPPET_CHARS
) -> None:
    """Score, document, pages, heading path and a text snippet per result."""
    results = response.results
    if not results:
        out.print(Text(f"no results in index '{index}'"))
        return
    for rank, hit in enumerate(results, 1):
        pages = _pages(hit.page_start, hit.page_end)
        line = Text.assemble(
            (f"{rank}. ", "bold"),
            (f"{hit.score:.4f}  ", "dim"),
            (hit.document_id, "bold cyan"),
            f"  {pages}" if pages else "",
            (f"  {' > '.join(hit.headings)}" if hit.headings else "", "magenta"),
        )
        out.print(line)
        out.print(Text("   ").append_text(excerpt_text(hit, snippet=snippet)))
    out.print(Text(f"{len(results)} results ({mode}) in {response.took_ms:.0f} ms", style="dim"))


def excerpt_text(hit: SearchResult, *, snippet: int = SNIPPET_CHARS) -> Text:
    """The result's excerpt with the query's terms in bold, as the server found them (the
    first `snippet` characters of its text from a server without excerpts)."""
    text = hit.text
    if hit.excerpt is None:
        flat = " ".join(text.split())
        return Text(flat[:snippet] + "…" if len(flat) > snippet else flat)
    start, end = hit.excerpt.start, hit.excerpt.end
    shown = Text("… " if start > 0 else "")
    position = start
    for lo, hi in hit.highlights:
        lo, hi = max(lo, start), min(hi, end)
        if hi <= lo or lo < position:
            continue
        shown.append(_flat(text[position:lo]))
        shown.append(_flat(text[lo:hi]), style="bold yellow")
        position = hi
    shown.append(_flat(text[position:end]))
    if end < len(text):
        shown.append(" …")
    return shown


def _flat(text: str) -> str:
    """`text` with each run of whitespace (line breaks too) as one space, ends kept."""
    return re.sub(r"\s+", " ", text)


def _pages(start: int | None, end: int | None) -> str:
    if start is None:
        return ""
    return f"p. {start}" if end in (None, start) else f"pp. {start}-{end}"


def _status(args: argparse.Namespace, settings: Settings) -> int:
    with client_for(args, settings) as client:
        try:
            job = client.get_job(args.job_id)
        except DocingestError as exc:
            return fail(exc)
    if args.json:
        print(json.dumps(job.to_json(), ensure_ascii=False, indent=2))
    else:
        console().print(job_text(job))
    return 0


def job_text(job: Job) -> Text:
    """A job as aligned `field  value` lines."""
    lines: list[tuple[str, str]] = [
        ("job", job.job_id),
        ("index", job.index),
        ("document", f"{job.document_id} (file {job.filename})"),
        ("status", job.status + (f", {job.stage}" if job.stage else "")),
        ("progress", f"{job.progress:.0%}"),
        ("pages", f"{job.pages_done}/{_count(job.pages_total)}"),
        (
            "chunks",
            f"{job.chunks_embedded}/{_count(job.chunks_total)} embedded, {job.chunks_done} stored",
        ),
        ("attempts", str(job.attempts)),
    ]
    for field in ("created_at", "started_at", "finished_at", "heartbeat_at"):
        value = getattr(job, field)
        if value:
            lines.append((field.removesuffix("_at"), str(value)))
    result = job.result
    if result:
        lines.append(
            (
                "result",
                f"version {result.version}, {result.format}, "
                f"{_count(result.words)} words, {result.chunks} chunks "
                f"({result.chunks_reused} reused)" + (", unchanged" if result.unchanged else ""),
            )
        )
    if job.error:
        lines.append(("error", f"{job.error.code}: {job.error.message}"))
    width = max(len(name) for name, _ in lines)
    return Text("\n".join(f"{name:<{width}}  {value}" for name, value in lines))
