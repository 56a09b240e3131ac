"""Parsing in a limited child process: the same result as in process, and each limit mapped
to its job error code (the child dies, this process does not)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from docingest.pipeline.chunking import ChunkingSpec
from docingest.pipeline.errors import (
    Cancelled,
    DocumentTooLarge,
    ExtractionTimeout,
    UnsupportedFormat,
)
from docingest.pipeline.isolation.parent import (
    MIN_CPU_SECONDS,
    Limits,
    child_environment,
    start_fork_servers,
)
from docingest.pipeline.prepare import prepare_document
from docingest.pipeline.settings import Settings
from tests.support.bounded_files import text_pages_tiff
from tests.support.paths import EXAMPLES_DIR, REPO_DIR
from tests.support.prepared import prepare_isolated

EXAMPLES = EXAMPLES_DIR
RFC = EXAMPLES / "rfc6455-websocket.txt"


def test_the_child_returns_what_prepare_document_returns() -> None:
    settings = Settings()
    stages: list[str] = []
    pages: list[tuple[int, int]] = []
    isolated = prepare_isolated(
        RFC,
        filename=RFC.name,
        settings=settings,
        on_stage=stages.append,
        on_page=lambda done, total: pages.append((done, total)),
    )
    direct = prepare_document(
        RFC.read_bytes(),
        filename=RFC.name,
        settings=settings,
        chunking=ChunkingSpec.from_settings(settings),
    )
    assert isolated.chunks == direct.chunks
    ignore = {"ingested_at"}
    assert {k: v for k, v in isolated.metadata.items() if k not in ignore} == {
        k: v for k, v in direct.metadata.items() if k not in ignore
    }
    assert stages == ["detecting", "extracting", "chunking"]
    assert pages == [(1, 1)]


def test_a_permanent_error_in_the_child_arrives_as_itself(tmp_path: Path) -> None:
    blob = tmp_path / "blob.txt"
    blob.write_bytes(os.urandom(4096))
    with pytest.raises(UnsupportedFormat):
        prepare_isolated(blob, filename=blob.name, settings=Settings())


def test_the_memory_limit_fails_the_document_as_too_large(tmp_path: Path) -> None:
    """40 MB of text needs far more than the 300 MiB address space allowed here."""
    big = tmp_path / "big.txt"
    big.write_text(RFC.read_text() * 250)
    limits = Limits(memory_bytes=300 * 2**20, cpu_seconds=60, wall_seconds=60)
    with pytest.raises(DocumentTooLarge, match="300 MiB"):
        prepare_isolated(big, filename=big.name, settings=Settings(), limits=limits)


def test_the_cpu_limit_fails_the_document_with_timeout(tmp_path: Path) -> None:
    """8,000 unmatched brackets send Python-Markdown's link parser past 20 s of CPU."""
    brackets = tmp_path / "brackets.md"
    brackets.write_text("[" * 8000)
    limits = Limits(memory_bytes=3 * 2**30, cpu_seconds=1, wall_seconds=60)
    with pytest.raises(ExtractionTimeout, match="1 s of CPU") as caught:
        prepare_isolated(brackets, filename=brackets.name, settings=Settings(), limits=limits)
    assert caught.value.code == "timeout"


def test_one_server_parses_file_after_file_even_after_a_killed_child(tmp_path: Path) -> None:
    """A failed or killed parse leaves the warm server usable for the next upload."""
    brackets = tmp_path / "brackets.md"
    brackets.write_text("[" * 8000)
    settings = Settings()
    slow = Limits(memory_bytes=3 * 2**30, cpu_seconds=60, wall_seconds=0.5)
    for _ in range(3):
        with pytest.raises(ExtractionTimeout):
            prepare_isolated(brackets, filename=brackets.name, settings=settings, limits=slow)
        assert prepare_isolated(RFC, filename=RFC.name, settings=settings).chunks


def test_the_wall_clock_deadline_fails_the_document_with_timeout(tmp_path: Path) -> None:
    brackets = tmp_path / "brackets.md"
    brackets.write_text("[" * 8000)
    limits = Limits(memory_bytes=3 * 2**30, cpu_seconds=60, wall_seconds=0.5)
    with pytest.raises(ExtractionTimeout, match="longer than"):
        prepare_isolated(brackets, filename=brackets.name, settings=Settings(), limits=limits)


def test_cpu_time_grows_with_the_file_up_to_the_cap() -> None:
    settings = Settings(extraction_cpu_seconds=900, extraction_cpu_seconds_per_mb=60)
    small = Limits.from_settings(settings, size_bytes=64 * 1024)
    manual = Limits.from_settings(settings, size_bytes=6_534_438)
    huge = Limits.from_settings(settings, size_bytes=100 * 2**20)
    assert small.cpu_seconds == MIN_CPU_SECONDS + 3
    assert manual.cpu_seconds == 433
    assert huge.cpu_seconds == 900
    assert small.wall_seconds < manual.wall_seconds <= settings.extraction_timeout_seconds


def test_the_parsing_processes_get_no_secrets() -> None:
    environ = {
        "PATH": "/usr/bin",
        "HOME": "/home/docingest",
        "OPENAI_API_KEY": "sk-live",
        "DOCINGEST_REDIS_URL": "redis://:hunter2@redis:6379/0",
        "DOCINGEST_API_KEYS": '[{"key": "s3cret"}]',
        "AWS_SECRET_ACCESS_KEY": "aws",
        "GITHUB_TOKEN": "ghp",
        "PGPASSWORD": "pg",
    }
    assert child_environment(environ) == {"PATH": "/usr/bin", "HOME": "/home/docingest"}


WARM_CHECK = """
import gc, json, sys
from pathlib import Path
from docingest.pipeline.isolation import child
from docingest.pipeline.chunking import ChunkingSpec
from docingest.pipeline.prepare import prepare_document
from docingest.pipeline.settings import Settings

child._warm_up()
frozen, before = gc.get_freeze_count(), set(sys.modules)
for path in map(Path, sys.argv[1:]):
    settings = Settings()
    chunking = ChunkingSpec.from_settings(settings)
    prepare_document(path.read_bytes(), filename=path.name, settings=settings, chunking=chunking)
print(json.dumps({"frozen": frozen, "imported": sorted(set(sys.modules) - before)}))
"""


def test_the_fork_server_loads_what_parsing_needs_before_it_forks(corpus_dir: Path) -> None:
    """What a child would otherwise import on first use (some 80 codec modules for a
    non-UTF-8 text) is loaded by the server, and its heap is frozen out of the children's
    garbage collections."""
    files = [
        corpus_dir / "txt" / "cp1251-russian.txt",
        corpus_dir / "markdown" / "umlauts-non-utf8.md",
        corpus_dir / "html" / "shift_jis-no-charset-declared.html",
        corpus_dir / "txt" / "latin1-french-visa.txt",
    ]
    found = subprocess.run(
        [sys.executable, "-c", WARM_CHECK, *map(str, files)],
        capture_output=True,
        text=True,
        check=True,
        cwd=REPO_DIR,
        env=child_environment(os.environ),
    )
    report = json.loads(found.stdout)
    assert report["frozen"] > 100_000
    assert report["imported"] == []


def _fork_servers() -> set[int]:
    """Pids of this process's children that are fork servers."""
    found = set()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            parent = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            command = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        if parent == os.getpid() and b"docingest.pipeline.isolation.child" in command:
            found.add(int(entry.name))
    return found


def test_fork_servers_started_ahead_serve_the_uploads() -> None:
    before = _fork_servers()
    start_fork_servers(len(before) + 2)
    started = _fork_servers()
    assert len(started) == len(before) + 2
    settings = Settings()
    for _ in range(3):
        prepare_isolated(RFC, filename=RFC.name, settings=settings)
    assert _fork_servers() == started  # no server was started for those uploads


def test_a_cancel_stops_ocr_between_pages_and_keeps_the_server(tmp_path: Path) -> None:
    """Asked between the pages of a long scan, the cancel kills the OCR'ing grandchild: the
    parse ends `Cancelled` after a page or two, not after all 40, and the same warm server
    parses the next file. Bounded in work, not time (issue 40): the flag is asked after each
    page, so no page is reported after the one that saw the request, however loaded the
    machine."""
    scan = tmp_path / "scan.tif"
    scan.write_bytes(text_pages_tiff(40))
    pages: list[int] = []
    with pytest.raises(Cancelled):
        prepare_isolated(
            scan,
            filename=scan.name,
            settings=Settings(),
            on_page=lambda done, total: pages.append(done),
            should_cancel=lambda: bool(pages),  # as soon as the first page is read
        )
    assert pages and max(pages) <= pages[0] + 1, pages  # at most the page in flight
    assert prepare_isolated(RFC, filename=RFC.name, settings=Settings()).chunks
