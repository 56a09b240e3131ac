"""`docingest sync DIR --index X [--prune] [--dry-run]`: make an index mirror a folder.

The plan compares each file's sha256 with the `content_sha256` the documents listing gives,
so an unchanged file is never uploaded (not even to be answered `unchanged`). Every document
a sync uploads carries `SYNC_KEY` in its metadata (the sync's source, by default the folder's
absolute path), and `--prune` deletes only documents with this sync's mark whose file is gone,
never another document of the index. Uploads run (and are waited for) before any delete, so an
interrupted sync leaves nothing deleted that it should not, and running it again finishes it.
"""

from __future__ import annotations

import argparse
import hashlib
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.text import Text

from docingest import Client, DocingestError, NotFound, batch
from docingest.batch import Item
from docingest.models import Document

if TYPE_CHECKING:
    from docingest.pipeline.settings import Settings

SYNC_KEY = "docingest_sync"
"""The metadata key that marks a document as a sync's own: its value is the sync's source.
User metadata keys start with a letter (docingest/pipeline/metadata.py), so no `_sync`;
docs/guides/command-line.md, "Mirror a folder"."""
HASH_CHUNK = 1 << 20


def file_sha256(path: Path) -> str:
    """The hex sha256 of `path`'s bytes, read in 1 MiB chunks."""
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while chunk := handle.read(HASH_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


@dataclass
class Plan:
    """What a sync will do, file by file."""

    new: list[Item] = field(default_factory=list)
    changed: list[Item] = field(default_factory=list)
    relabel: list[Item] = field(default_factory=list)
    """Same bytes, other metadata: updated in place (PATCH), uploaded again where the server
    has no PATCH yet."""
    unchanged: list[Item] = field(default_factory=list)
    unreadable: list[tuple[Item, str]] = field(default_factory=list)
    gone: list[Document] = field(default_factory=list)
    """This sync's documents whose file is gone (deleted only with --prune)."""

    @property
    def uploads(self) -> list[Item]:
        return self.new + self.changed


def make_plan(
    items: Iterable[Item], remote: Iterable[Document], *, source: str, metadata: dict[str, Any]
) -> Plan:
    """Compare local files with the index's documents (those of other sources are ignored,
    unless a local file has the same id: it is then uploaded and becomes this sync's)."""
    ours: dict[str, Document] = {}
    others: dict[str, Document] = {}
    for document in remote:
        mine = document.metadata.get(SYNC_KEY) == source
        (ours if mine else others)[document.document_id] = document
    plan = Plan()
    local: set[str] = set()
    for item in items:
        document_id = item.document_id or item.label
        local.add(document_id)
        try:
            digest = file_sha256(item.path)
        except OSError as exc:
            plan.unreadable.append((item, f"Cannot read {item.path}: {exc.strerror or exc}."))
            continue
        stored = ours.get(document_id)
        if stored is None:
            (plan.changed if document_id in others else plan.new).append(item)
        elif stored.content_sha256 != digest:
            plan.changed.append(item)
        elif stored.metadata != metadata:
            plan.relabel.append(item)
        else:
            plan.unchanged.append(item)
    plan.gone = [ours[name] for name in sorted(set(ours) - local)]
    return plan


def add_sync_command(commands: Any) -> None:
    from docingest.commands import connection_options

    sync = commands.add_parser(
        "sync", help="upload a folder's new and changed files; --prune deletes those gone"
    )
    sync.add_argument("directory", type=Path, metavar="DIR")
    sync.add_argument("--index", default="default", help="target index (default: default)")
    sync.add_argument(
        "--prune",
        action="store_true",
        help="delete the documents this sync uploaded whose files are gone (never others)",
    )
    sync.add_argument("--dry-run", action="store_true", help="print the plan, change nothing")
    sync.add_argument(
        "--metadata", type=_json_object, help="JSON object added to every document's metadata"
    )
    sync.add_argument(
        "--id-prefix",
        default="",
        help="put in front of each document id (a file's path inside DIR), e.g. 'handbook/'",
    )
    sync.add_argument(
        "--source",
        help=f"the sync's name, stored as metadata '{SYNC_KEY}' (default: DIR's absolute path)",
    )
    connection_options(sync)
    sync.set_defaults(handler=run_sync)


def _json_object(raw: str) -> dict[str, Any]:
    from docingest.commands import _json_object as parse

    return dict(parse("--metadata")(raw))


def run_sync(args: argparse.Namespace, settings: Settings) -> int:
    from docingest.commands import client_for, console, fail, follow, show, summary_table

    directory: Path = args.directory
    if not directory.is_dir():
        return fail(f"no such folder: {directory}", 2)
    source = args.source or directory.resolve().as_posix()
    metadata = {**(args.metadata or {}), SYNC_KEY: source}
    items = batch.collect([directory])
    for item in items:
        item.document_id = args.id_prefix + (item.document_id or item.label)
    out, err = console(), console(stderr=True)
    with client_for(args, settings) as client:
        try:
            remote = _documents(client, args.index, source)
            plan = make_plan(items, remote, source=source, metadata=metadata)
            _print_plan(out, plan, prune=args.prune, dry_run=args.dry_run)
            if args.dry_run:
                return 0
            if plan.uploads:
                follow(client, plan.uploads, index=args.index, metadata=metadata, wait=True)
            failed = [item for item in plan.uploads if item.status != "completed"]
            relabelled = _relabel(client, plan.relabel, args.index, metadata, err)
            deleted = _prune(client, plan.gone, args.index, err) if args.prune else 0
        except DocingestError as exc:
            return fail(exc)
        except KeyboardInterrupt:
            fail("interrupted; run the same sync again to finish it")
            return 130
    if plan.uploads:
        show(out, summary_table(plan.uploads))
    out.print(
        Text(
            f"sync: {len(plan.uploads) - len(failed)} uploaded, {len(plan.unchanged)} unchanged, "
            f"{relabelled} metadata updated, {deleted} deleted, "
            f"{len(failed) + len(plan.unreadable)} failed"
        )
    )
    return 1 if failed or plan.unreadable or relabelled < len(plan.relabel) else 0


def _documents(client: Client, index: str, source: str) -> list[Document]:
    """The index's documents marked by `source` (a server without filters lists them all; the
    plan reads the mark itself). An index that does not exist yet has none."""
    try:
        return list(client.iter_documents(index, filter={SYNC_KEY: source}, page_size=500))
    except NotFound:
        return []


def _print_plan(out: Any, plan: Plan, *, prune: bool, dry_run: bool) -> None:
    lines = [("upload (new)", item.label) for item in plan.new]
    lines += [("upload (changed)", item.label) for item in plan.changed]
    lines += [("update metadata", item.label) for item in plan.relabel]
    lines += [("unreadable", f"{item.label}: {why}") for item, why in plan.unreadable]
    verb = "delete (gone)" if prune else "gone (kept without --prune)"
    lines += [(verb, document.document_id) for document in plan.gone]
    if dry_run or len(lines) <= 50:
        for action, what in lines:
            out.print(Text(f"{action:<28}{what}"))
    out.print(
        Text(
            f"plan: {len(plan.new)} new, {len(plan.changed)} changed, {len(plan.relabel)} "
            f"metadata only, {len(plan.unchanged)} unchanged, {len(plan.gone)} gone"
            + (" (dry run: nothing changed)" if dry_run else "")
        )
    )


def _relabel(
    client: Client, items: list[Item], index: str, metadata: dict[str, Any], err: Any
) -> int:
    """Set `metadata` on documents whose bytes did not change: PATCH where the server has it
    (v1.2), else a forced upload."""
    done = 0
    for item in items:
        document_id = item.document_id or item.label
        try:
            client.update_metadata(index, document_id, metadata)
        except DocingestError as exc:
            if exc.status not in (404, 405) or exc.code == "document_not_found":
                err.print(Text(f"{item.label}: {exc}"))
                continue
            accepted = client.upload(
                index, item.path, document_id=document_id, metadata=metadata, force=True
            )
            job = client.wait(accepted, raise_on_failure=False)
            if job.status != "completed":
                err.print(Text(f"{item.label}: {job.error.message if job.error else job.status}"))
                continue
        done += 1
    return done


def _prune(client: Client, gone: list[Document], index: str, err: Any) -> int:
    deleted = 0
    for document in gone:
        try:
            client.delete_document(index, document.document_id)
        except NotFound:
            pass  # already gone: what prune wanted
        deleted += 1
        err.print(Text(f"deleted {document.document_id}"))
    return deleted
