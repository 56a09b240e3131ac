"""`docingest ingest/search/status` and `serve --seed`, run as real commands against a real
`docingest serve` subprocess (its own data dir, Redis key prefix and port)."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

import httpx
import pytest

from tests.support.docingest_service import (
    DOCINGEST,
    LOADED_START_TIMEOUT,
    Process,
    ServiceEnv,
    free_port,
    running_serve,
    start,
)
from tests.support.paths import EXAMPLES_DIR

EXAMPLES = EXAMPLES_DIR
SMALL_EXAMPLES = (
    "docling-README.md",
    "tika-sample-word-document.docx",
    "python311-tutorial-introduction.html",
)
INDEX = "cli-examples"
API_KEY = "cli-test-key-5f2c"
"""The module's service wants this key; `docingest()` passes it as DOCINGEST_API_KEY."""
AUTH = {"Authorization": f"Bearer {API_KEY}"}


def docingest(
    args: Sequence[str],
    *,
    url: str,
    api_key: str | None = API_KEY,
    timeout: float = 240,
    cwd: Path | None = None,
) -> subprocess.CompletedProcess[str]:
    """Run the real `docingest` command with DOCINGEST_URL (and the key) set, nothing else."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("DOCINGEST_")}
    env["DOCINGEST_URL"] = url
    if api_key is not None:
        env["DOCINGEST_API_KEY"] = api_key
    return subprocess.run(
        [str(DOCINGEST), *args], env=env, capture_output=True, text=True, timeout=timeout, cwd=cwd
    )


def row(output: str, name: str) -> str:
    """The summary table row that names `name`, as one line: a long path or note folds onto
    the row's next lines, whose status cell is empty, so those are joined back cell by cell."""
    rows: list[list[str]] = []
    for line in output.splitlines():
        cells = [cell.strip() for cell in line.split("│")]
        if len(cells) < 2:
            continue
        if rows and not cells[1] and len(cells) == len(rows[-1]):
            first = rows[-1][0] + cells[0]  # a path folds mid-name, with no space
            rest = [f"{a} {b}".strip() for a, b in zip(rows[-1][1:], cells[1:], strict=True)]
            rows[-1] = [first, *rest]
        else:
            rows.append(cells)
    found = [" │ ".join(cells) for cells in rows if name in cells[0]]
    assert found, f"no row names {name}:\n{output}"
    return found[0]


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServiceEnv]:
    env = ServiceEnv(
        data_dir=tmp_path_factory.mktemp("cli-serve"),
        extra={"DOCINGEST_API_KEYS": json.dumps([{"key": API_KEY}])},
    )
    with running_serve(env, timeout=LOADED_START_TIMEOUT):
        yield env


@pytest.fixture(scope="module")
def ingested(service: ServiceEnv) -> subprocess.CompletedProcess[str]:
    """Three small examples ingested into INDEX with metadata, waited for."""
    paths = [str(EXAMPLES / name) for name in SMALL_EXAMPLES]
    metadata = json.dumps({"team": "docs", "tags": ["example"]})
    return docingest(
        ["ingest", *paths, "--index", INDEX, "--metadata", metadata], url=service.base_url
    )


def test_ingest_reports_every_file_completed(
    service: ServiceEnv, ingested: subprocess.CompletedProcess[str]
) -> None:
    assert ingested.returncode == 0, ingested.stdout + ingested.stderr
    for name in SMALL_EXAMPLES:
        line = row(ingested.stdout, name)
        assert "completed" in line
        assert re.search(r"│\s+[1-9]\d*\s+│", line), line  # a chunk count
    assert "\x1b[" not in ingested.stdout + ingested.stderr  # plain text off a terminal
    documents = httpx.get(f"{service.base_url}/v1/indexes/{INDEX}/documents", headers=AUTH).json()[
        "documents"
    ]
    assert {doc["document_id"] for doc in documents} == set(SMALL_EXAMPLES)
    assert all(doc["metadata"] == {"team": "docs", "tags": ["example"]} for doc in documents)


def test_reingest_of_unchanged_file_says_so(
    service: ServiceEnv, ingested: subprocess.CompletedProcess[str]
) -> None:
    assert ingested.returncode == 0
    metadata = json.dumps({"team": "docs", "tags": ["example"]})
    again = docingest(
        ["ingest", str(EXAMPLES / SMALL_EXAMPLES[1]), "--index", INDEX, "--metadata", metadata],
        url=service.base_url,
    )
    assert again.returncode == 0, again.stdout + again.stderr
    assert "unchanged" in row(again.stdout, SMALL_EXAMPLES[1])


def test_corrupt_file_fails_with_its_code(service: ServiceEnv, tmp_path: Path) -> None:
    broken = tmp_path / "broken.pdf"
    broken.write_bytes(b"%PDF-1.7\n" + os.urandom(4000))
    good = tmp_path / "note.txt"
    good.write_text("A short note about the quarterly budget review.\n" * 5)
    result = docingest(
        ["ingest", str(broken), str(good), "--index", "cli-broken"], url=service.base_url
    )
    assert result.returncode == 1, result.stdout + result.stderr
    assert "failed" in row(result.stdout, "broken.pdf")
    assert "corrupt_document" in row(result.stdout, "broken.pdf")
    assert "completed" in row(result.stdout, "note.txt")


def test_the_table_names_the_document_the_service_stored(
    service: ServiceEnv, tmp_path: Path
) -> None:
    (tmp_path / "csv").mkdir()
    (tmp_path / "csv" / "stanley-cups.csv").write_text("year,team\n1994,Rangers\n")
    result = docingest(
        ["ingest", "csv/stanley-cups.csv", "--index", "cli-named"], url=service.base_url,
        cwd=tmp_path,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    assert row(result.stdout, "stanley-cups.csv").startswith("stanley-cups.csv │ completed")
    assert "csv/stanley-cups.csv" not in result.stdout + result.stderr
    documents = httpx.get(f"{service.base_url}/v1/indexes/cli-named/documents", headers=AUTH)
    assert [doc["document_id"] for doc in documents.json()["documents"]] == ["stanley-cups.csv"]


def test_folder_is_walked_skipping_hidden_files(service: ServiceEnv, tmp_path: Path) -> None:
    (tmp_path / "team" / "notes").mkdir(parents=True)
    (tmp_path / "team" / "notes" / "plan.md").write_text("# Plan\n\nShip the search feature.\n")
    (tmp_path / "team" / "todo.txt").write_text("Review the ingestion dashboards.\n")
    (tmp_path / "team" / ".secret.txt").write_text("not for the index\n")
    (tmp_path / "team" / ".git").mkdir()
    (tmp_path / "team" / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    result = docingest(
        ["ingest", str(tmp_path / "team"), "--index", "cli-folder"], url=service.base_url
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "secret" not in result.stdout and "HEAD" not in result.stdout
    documents = httpx.get(
        f"{service.base_url}/v1/indexes/cli-folder/documents", headers=AUTH
    ).json()
    assert {doc["document_id"] for doc in documents["documents"]} == {"notes/plan.md", "todo.txt"}


def test_search_prints_the_matching_document(
    service: ServiceEnv, ingested: subprocess.CompletedProcess[str]
) -> None:
    assert ingested.returncode == 0
    query = "convert PDF documents with the docling command line"
    result = docingest(["search", query, "--index", INDEX, "--top-k", "3"], url=service.base_url)
    assert result.returncode == 0, result.stderr
    first = result.stdout.splitlines()[0]
    assert first.startswith("1. ") and "docling-README.md" in first, result.stdout
    assert "results (hybrid)" in result.stdout

    as_json = docingest(
        ["search", query, "--index", INDEX, "--mode", "keyword", "--json", "--filter",
         json.dumps({"document_id": "python311-tutorial-introduction.html"})],
        url=service.base_url,
    )  # fmt: skip
    assert as_json.returncode == 0, as_json.stderr
    results = json.loads(as_json.stdout)["results"]
    assert results
    assert {hit["document_id"] for hit in results} == {"python311-tutorial-introduction.html"}


def test_search_of_a_missing_index_says_so(service: ServiceEnv) -> None:
    result = docingest(["search", "anything", "--index", "cli-nothing-here"], url=service.base_url)
    assert result.returncode == 1
    assert "index_not_found" in result.stderr and "cli-nothing-here" in result.stderr


def test_no_wait_then_status(service: ServiceEnv, tmp_path: Path) -> None:
    note = tmp_path / "memo.md"
    note.write_text("# Memo\n\nThe office moves to the third floor in May.\n")
    queued = docingest(
        ["ingest", str(note), "--index", "cli-status", "--document-id", "memos/may"],
        url=service.base_url,
    )
    assert queued.returncode == 0
    queued = docingest(
        ["ingest", str(note), "--index", "cli-status", "--no-wait"],
        url=service.base_url,
    )
    assert queued.returncode == 0, queued.stdout + queued.stderr
    job_id = re.search(r"\b[0-9a-f]{32}\b", row(queued.stdout, "memo.md"))
    assert job_id, queued.stdout
    deadline = time.monotonic() + 120
    while True:
        shown = docingest(["status", job_id[0], "--json"], url=service.base_url)
        assert shown.returncode == 0, shown.stderr
        job = json.loads(shown.stdout)
        if job["status"] in ("completed", "failed") or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    assert job["status"] == "completed" and job["document_id"] == "memo.md"
    text = docingest(["status", job_id[0]], url=service.base_url)
    assert text.returncode == 0
    assert re.search(rf"^job\s+{job_id[0]}$", text.stdout, re.MULTILINE), text.stdout
    assert re.search(r"^status\s+completed$", text.stdout, re.MULTILINE), text.stdout
    assert "memo.md" in text.stdout
    documents = httpx.get(
        f"{service.base_url}/v1/indexes/cli-status/documents", headers=AUTH
    ).json()
    assert {doc["document_id"] for doc in documents["documents"]} == {"memos/may", "memo.md"}


def test_status_of_unknown_job(service: ServiceEnv) -> None:
    result = docingest(["status", "0" * 32], url=service.base_url)
    assert result.returncode == 1
    assert "job_not_found" in result.stderr


def test_api_key_from_option_or_environment_and_never_printed(
    service: ServiceEnv, ingested: subprocess.CompletedProcess[str]
) -> None:
    assert ingested.returncode == 0
    search = ["search", "docling", "--index", INDEX, "--json"]
    refused = docingest(search, url=service.base_url, api_key=None)
    assert refused.returncode == 1
    assert "unauthorized" in refused.stderr and "HTTP 401" in refused.stderr

    wrong = docingest(search, url=service.base_url, api_key="not-the-key")
    assert wrong.returncode == 1 and "HTTP 401" in wrong.stderr
    assert "not-the-key" not in wrong.stdout + wrong.stderr

    by_option = docingest([*search, "--api-key", API_KEY], url=service.base_url, api_key=None)
    assert by_option.returncode == 0, by_option.stderr
    assert json.loads(by_option.stdout)["results"]
    assert API_KEY not in by_option.stdout + by_option.stderr


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--metadata", "{team: docs}"], "--metadata is not valid JSON"),
        (["--metadata", '["docs"]'], "--metadata must be a JSON object"),
        (["--document-id", "one"], "--document-id needs exactly one file"),
    ],
)
def test_bad_options_exit_2(args: list[str], message: str) -> None:
    files = [str(EXAMPLES / name) for name in SMALL_EXAMPLES[:2]]
    result = docingest(["ingest", *files, *args], url=f"http://127.0.0.1:{free_port()}")
    assert result.returncode == 2
    assert message in result.stderr


def test_missing_path_exits_2(tmp_path: Path) -> None:
    result = docingest(["ingest", str(tmp_path / "nope.pdf")], url="http://127.0.0.1:9")
    assert result.returncode == 2
    assert "no such file or folder" in result.stderr


@pytest.mark.parametrize(
    "command",
    [["ingest", str(EXAMPLES / "docling-README.md")], ["search", "anything"], ["status", "x"]],
)
def test_no_service_is_a_clear_message(command: list[str]) -> None:
    url = f"http://127.0.0.1:{free_port()}"
    result = docingest(command, url=url, timeout=60)
    assert result.returncode == 1
    assert f"no docingest service answers at {url}" in result.stderr
    assert "docingest serve" in result.stderr
    assert "Traceback" not in result.stderr


def wait_for_log(process: Process, text: str, *, timeout: float = 240) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        log = process.log()
        if text in log:
            return log
        if process.popen.poll() is not None:
            raise AssertionError(f"serve exited with {process.popen.returncode}:\n{log}")
        time.sleep(0.3)
    process.stop()
    raise AssertionError(f"{text!r} not in the log after {timeout:.0f} s:\n{process.log()}")


def test_serve_seed_ingests_once_and_searches(tmp_path: Path) -> None:
    seed_dir = tmp_path / "examples"
    seed_dir.mkdir()
    for name in ("docling-README.md", "tika-sample-word-document.docx", "SOURCES.md"):
        shutil.copy(EXAMPLES / name, seed_dir / name)
    (seed_dir / "README.md").write_text("# About these files\n\nNot a document to index.\n")
    env = ServiceEnv(data_dir=tmp_path / "data")

    first = start(["serve", "--seed", str(seed_dir)], env, name="seed-first")
    try:
        log = wait_for_log(first, "Try next:")
    finally:
        first.stop()
    assert "seeding index 'examples' with 2 files" in log
    assert "docling-README.md: completed" in log
    assert "tika-sample-word-document.docx: completed" in log
    assert "2 of 2 files ingested into 'examples'" in log
    assert not re.search(r"^  (SOURCES|README)\.md:", log, re.MULTILINE), log
    assert "Sample search of 'examples'" in log
    assert re.search(r"^1\. \d\.\d{4}  (docling-README\.md|tika-sample)", log, re.MULTILINE), log
    assert f"curl -s '{env.base_url}/v1/indexes/examples/search?q=" in log
    assert "HTTP Request:" not in log  # no httpx line per poll in the server log

    env.port = free_port()
    second = start(["serve", "--seed", str(seed_dir)], env, name="seed-second")
    try:
        log = wait_for_log(second, "already holds")
    finally:
        second.stop()
    assert "index 'examples' already holds 2 documents" in log
    assert "seeding index" not in log


def test_url_before_the_subcommand_is_honoured(
    service: ServiceEnv, ingested: subprocess.CompletedProcess[str]
) -> None:
    """`docingest --url URL search ...`, the form serve's hint prints, exited 2."""
    assert ingested.returncode == 0
    dead = f"http://127.0.0.1:{free_port()}"  # DOCINGEST_URL points nowhere: --url must win
    args = ["--url", service.base_url, "--api-key", API_KEY, "search", "docling", "--index", INDEX]
    result = docingest([*args, "--json"], url=dead, api_key=None)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["results"]
    after = docingest(["search", "docling", "--index", INDEX, "--url", service.base_url], url=dead)
    assert after.returncode == 0, after.stderr


def test_serve_with_keys_seeds_and_its_hints_work(tmp_path: Path) -> None:
    """With DOCINGEST_API_KEYS set the seed sent no key (401); on another port than 8000 the
    hint names --url; without Tesseract's data serve says at start that OCR is off."""
    seed_dir = tmp_path / "examples"
    seed_dir.mkdir()
    shutil.copy(EXAMPLES / "docling-README.md", seed_dir / "docling-README.md")
    no_tessdata = tmp_path / "no-tessdata"
    no_tessdata.mkdir()
    env = ServiceEnv(
        data_dir=tmp_path / "data",
        extra={
            "DOCINGEST_API_KEYS": json.dumps([{"key": API_KEY, "indexes": ["examples"]}]),
            "DOCINGEST_OCR_TESSDATA_DIR": str(no_tessdata),
        },
    )
    served = start(["serve", "--seed", str(seed_dir)], env, name="seed-keys")
    try:
        log = wait_for_log(served, "Try next:")
        assert "1 of 1 files ingested into 'examples'" in log, log
        assert f"client commands need `docingest --url {env.base_url} ...`" in log
        assert "OCR is off, so scans and images fail with no_text_found" in log
        assert f"not installed in {no_tessdata}" in log and "tesseract-ocr-eng" in log
        hint = next(line for line in log.splitlines() if "search 'your question'" in line)
        program, *options = shlex.split(hint)[: shlex.split(hint).index("search")]
        assert options == ["--url", env.base_url], hint
        search = [*options, "search", "docling", "--index", "examples", "--json"]
        result = docingest(search, url=f"http://127.0.0.1:{free_port()}")  # as the hint says
        assert result.returncode == 0, result.stderr
    finally:
        served.stop()
