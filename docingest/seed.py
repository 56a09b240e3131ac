"""`docingest serve --seed DIR`: on first start, ingest the example documents and show a search.

Runs in a thread of the server once it accepts requests, and talks to it over HTTP like any
client; it prints to stdout (the server logs to stderr).
"""

from __future__ import annotations

import logging
import os
import shlex
import shutil
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from rich.text import Text

from docingest import Client, DocingestError, batch
from docingest._core import API_KEY_ENV, DEFAULT_BASE_URL
from docingest.batch import Item
from docingest.commands import console, print_results
from docingest.pipeline.settings import ApiKey

SAMPLE_QUERY = "How is a WebSocket connection closed?"
"""Answered by the closing handshake sections of examples/rfc6455-websocket.txt."""
SAMPLE_TOP_K = 3


def _not_a_document(path: Path) -> bool:
    return path.name == "SOURCES.md" or path.name.upper().startswith("README")


def seed_key(keys: Sequence[ApiKey], index: str) -> str | None:
    """The key the seed sends: DOCINGEST_API_KEY, else the first key of DOCINGEST_API_KEYS
    given in clear that may use `index` (None without keys, or with only their sha256)."""
    chosen = os.environ.get(API_KEY_ENV) or None
    for key in keys:
        if chosen is None and key.key is not None and (key.indexes is None or index in key.indexes):
            chosen = key.key.get_secret_value()
    return chosen


def seed_examples(
    base_url: str,
    directory: Path,
    index: str = "examples",
    *,
    keys: Sequence[ApiKey] = (),
) -> None:
    """Ingest `directory` into `index` unless it has documents already, then search it once.

    With `keys` (the server's DOCINGEST_API_KEYS) it sends one that may use `index`, or says
    that it needs DOCINGEST_API_KEY when every key is given as its sha256.
    """
    logging.getLogger("httpx").setLevel(logging.WARNING)  # serve logs at INFO: one per poll
    out = console()

    def say(line: str) -> None:
        out.print(Text(line))

    api_key = seed_key(keys, index)
    if keys and api_key is None:
        say(
            f"docingest: not seeding '{index}': every key in DOCINGEST_API_KEYS is a sha256 or "
            f"limited to other indexes; set DOCINGEST_API_KEY to a key that may use '{index}'"
        )
        return
    with Client(base_url, api_key=api_key or "") as client:
        try:
            documents = {info.name: info.documents for info in client.list_indexes()}
            if documents.get(index):
                say(
                    f"docingest: index '{index}' already holds {documents[index]} documents; "
                    f"search it with `{_command(base_url)} search {shlex.quote(SAMPLE_QUERY)} "
                    f"--index {index}`"
                )
                return
            items = batch.collect([directory], exclude=_not_a_document)
            if not items:
                say(f"docingest: nothing to seed in {directory}")
                return
            say(f"docingest: seeding index '{index}' with {len(items)} files from {directory}")
            for item in items:
                item.label = item.document_id or item.label

            def report(item: Item) -> None:
                if item.finished:
                    say(_outcome(item))

            started = time.monotonic()
            batch.run(client, items, index=index, on_change=report)
            done = [item for item in items if item.status == "completed"]
            chunks = sum(item.result.chunks for item in done if item.result is not None)
            say(
                f"docingest: {len(done)} of {len(items)} files ingested into '{index}' "
                f"({chunks} chunks) in {time.monotonic() - started:.0f} s"
            )
            response = client.search(index, SAMPLE_QUERY, top_k=SAMPLE_TOP_K)
        except (DocingestError, FileNotFoundError) as exc:
            say(f"docingest: seeding '{index}' stopped: {exc}")
            return
    say(f"\nSample search of '{index}': {SAMPLE_QUERY}")
    print_results(out, response, index=index, mode="hybrid")
    say("\nTry next:")
    for line in try_next(base_url, index=index, with_key=api_key is not None):
        say(f"  {line}")


def _outcome(item: Item) -> str:
    """One line for a finished file: status, chunks and pages, or the error."""
    line = f"  {item.label}: {item.status}"
    if item.error is not None:
        return f"{line} ({item.error.code}: {item.error.message})"
    result = item.result
    chunks = result.chunks if result is not None else None
    pages = f", {result.pages} pages" if result is not None and result.pages else ""
    return f"{line}, {chunks} chunks{pages}"


def _command(base_url: str) -> str:
    """How to call `docingest` from a shell here, pointed at `base_url` unless it is the default."""
    argv0 = Path(sys.argv[0])
    command = "docingest" if shutil.which("docingest") or argv0.name != "docingest" else argv0
    url = "" if base_url == DEFAULT_BASE_URL else f" --url {base_url}"
    return f"{command}{url}"


def try_next(base_url: str, *, index: str, with_key: bool) -> list[str]:
    """Commands worth trying against the seeded service."""
    auth = ' -H "Authorization: Bearer $DOCINGEST_API_KEY"' if with_key else ""
    query = "closing+handshake+status+code"
    docingest = _command(base_url)
    return [
        f"curl -s{auth} '{base_url}/v1/indexes/{index}/search?q={query}&top_k=3'",
        f"curl -s{auth} {base_url}/v1/indexes/{index}/documents",
        f'curl -s{auth} -F file=@report.pdf -F \'metadata={{"team": "legal"}}\' '
        f"{base_url}/v1/indexes/default/documents",
        f"{docingest} ingest ~/Documents --index mine",
        f"{docingest} search 'your question' --index mine",
    ]
