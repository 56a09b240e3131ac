"""Hostile and broken inputs through one real `docingest serve` (issue #6, items 2, 3 and 5).

Every input gets its exact outcome (the job's error code, an HTTP error, or completion with the
right text), and after each one the same worker completes a small good job while the server
process stays up. The deployment's limits (ServiceEnv.extra), chosen so that bombs fail fast:

- DOCINGEST_MAX_PAGES=2000: the 10,000-page PDF meets the documented page limit.
- DOCINGEST_EXTRACTION_MEMORY_BYTES=800000000: the parsing child's address space (~210 MB of it
  is the interpreter and parsers); the 50 MB tag-dense page reaches it after ~15 s of CPU.
- DOCINGEST_EXTRACTION_CPU_SECONDS=25: a hung parser is killed after 25 s of CPU time, five
  times what the slowest legitimate input here (100k nested divs) needs.
- DOCINGEST_EXTRACTION_TIMEOUT_SECONDS=90: the wall-clock backstop, generous because a loaded
  2-core machine gives the child half a core.
- DOCINGEST_MAX_UPLOAD_BYTES: the default, 100 MiB.

Set DOCINGEST_HOSTILE_REPORT to a path to get each case's outcome and time there as JSON.
"""

from __future__ import annotations

import json
import os
import socket
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from tests.support import hostile_files as hostile
from tests.support.hostile_service import (
    BOUNDARY,
    EXTRACTION_CPU_SECONDS,
    INDEX,
    JOB_ID,
    MAX_JOB_CPU_SECONDS,
    MAX_UPLOAD_BYTES,
    Deployment,
    Listener,
    MiB,
    PeakRss,
    assert_failed,
    assert_still_serving,
    deployed,
    part_head,
    passwd_lines,
    run_job,
    search_texts,
)
from tests.support.http_client import assert_error
from tests.support.image_files import KNOWN_TEXT
from tests.support.proc import CpuMeter, children


@pytest.fixture(scope="module")
def deployment(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Deployment]:
    with deployed(tmp_path_factory.mktemp("hostile") / "data") as running:
        yield running


@pytest.fixture
def listener() -> Iterator[Listener]:
    """A loopback listener, proved to record a connection before the test uses it."""
    server = Listener()
    with socket.create_connection(server.address, timeout=5) as probe:
        probe.sendall(b"probe")
    deadline = time.monotonic() + 60  # room for a loaded machine; it takes milliseconds
    while server.connections != [b"probe"]:
        assert time.monotonic() < deadline, server.connections
        time.sleep(0.01)
    server.connections.clear()
    yield server
    server.close()


# --- inputs whose job must fail with a precise code ------------------------------------------


@dataclass(frozen=True)
class FailingCase:
    name: str
    filename: str
    build: Callable[[], bytes]
    code: str
    message: str
    """A pattern the job's error message must match."""


FAILING_CASES = [
    FailingCase(
        "elf-binary-named-pdf", "program.pdf", hostile.elf_binary,
        "unsupported_format", "This file is an ELF executable",
    ),
    FailingCase(
        "random-bytes-named-txt", "noise.txt", hostile.random_bytes,
        "unsupported_format", "binary data that is not a supported document format",
    ),
    FailingCase(
        "nested-flate-bomb-pdf", "bomb.pdf", hostile.flate_bomb_pdf,
        "document_too_large", "needs more than the 762 MiB allowed; it may be a decompression bomb",
    ),
    FailingCase(
        "cyclic-page-tree-pdf", "cyclic.pdf", hostile.cyclic_page_tree_pdf,
        "corrupt_document", "none of its 1 pages could be read",
    ),
    FailingCase(
        "10000-page-pdf", "pages.pdf", lambda: hostile.many_pages_pdf(10_000),
        "document_too_large", "The PDF has 10,000 pages, above the limit of 2,000",
    ),
    FailingCase(
        "encrypted-pdf", "secret.pdf",
        lambda: hostile.encrypted_pdf("Quarterly figures.", user_password="hunter2"),
        "encrypted_document", "password-protected",
    ),
    FailingCase(
        # OCR (Tesseract) reads the page and finds nothing in the grey gradient.
        "image-only-pdf", "scan.pdf", hostile.image_only_pdf,
        "no_text_found", "OCR found none",
    ),
    FailingCase(
        "pdf-page-too-large-to-render", "poster.pdf", hostile.giant_page_pdf,
        "document_too_large", "200,000 × 200,000 points; rendering it for OCR at 72 DPI",
    ),
    FailingCase(
        "png-pixel-bomb-50000x50000", "bomb.png", hostile.png_pixel_bomb,
        "document_too_large", r"declares 2,500,000,000 pixels\); the limit is 100,000,000",
    ),
    FailingCase(
        "truncated-jpeg", "cut.jpg", lambda: hostile.truncated_jpeg(KNOWN_TEXT),
        "corrupt_document", "image file is truncated",
    ),
    FailingCase(
        "10000-page-tiff", "pages.tif", lambda: hostile.many_pages_tiff(10_000),
        "document_too_large", "The TIFF has more than 2,000 pages",
    ),
    FailingCase(
        "docx-zip-bomb", "bomb.docx", hostile.docx_zip_bomb,
        "document_too_large", "declares 2,147,4",
    ),
    # Python-Markdown's link parser is worse than quadratic in unmatched brackets: 8,000 of
    # them take ~30 s, these 65,536 would take hours. Only the parsing child is killed.
    FailingCase(
        "markdown-parser-hang", "brackets.md", lambda: b"[" * 65_536,
        # Killed by its CPU limit, or by the wall clock first if the machine is that busy: its
        # deadline is twice the CPU limit plus 30 s (80 s), under the 90 s backstop.
        "timeout", "used more than its 25 s of CPU time|took longer than 80 s",
    ),
]  # fmt: skip


@pytest.mark.parametrize("case", FAILING_CASES, ids=[case.name for case in FAILING_CASES])
def test_hostile_file_fails_with_its_code(deployment: Deployment, case: FailingCase) -> None:
    data = case.build()
    with CpuMeter(deployment.process.popen.pid) as cpu:
        job = run_job(deployment, case.name, data, case.filename)

    assert_failed(job, case.code, case.message)
    assert cpu.seconds < MAX_JOB_CPU_SECONDS, cpu.seconds
    assert_still_serving(deployment)


def test_empty_file_is_refused_at_upload(deployment: Deployment) -> None:
    before = deployment.staged()
    started = time.monotonic()

    response = deployment.api.upload(INDEX, b"", filename="empty.pdf")

    deployment.record("empty-file", "HTTP 400 empty_document", time.monotonic() - started)
    assert "0 bytes" in assert_error(response, 400, "empty_document")
    assert deployment.staged() == before
    assert_still_serving(deployment)


def test_tag_dense_50_mb_html_hits_the_memory_limit(deployment: Deployment, tmp_path: Path) -> None:
    page = hostile.tag_dense_html(tmp_path, size=50 * MiB)
    assert 49 * MiB < page.stat().st_size <= 50 * MiB

    with CpuMeter(deployment.process.popen.pid) as cpu:
        job = run_job(deployment, "html-50-mb-tag-dense", page, "tags.html")

    # The tree of 6.5 million elements needs gigabytes: the child dies at its address-space
    # limit (762 MiB), long before its CPU limit; on a machine so busy that the child gets
    # under a fifth of a core, its wall deadline (80 s) comes first. Bounded either way.
    code = job["error"]["code"] if job["error"] else None
    if code == "timeout":
        assert_failed(job, "timeout", "took longer than 80 s")
    else:
        assert_failed(job, "document_too_large", "needs more than the 762 MiB allowed")
    assert cpu.seconds < MAX_JOB_CPU_SECONDS, cpu.seconds
    assert_still_serving(deployment)


# --- inputs that must complete, with the right text ------------------------------------------


def test_docx_member_that_lies_about_its_size_is_cut_at_the_declared_size(
    deployment: Deployment,
) -> None:
    # It declares 1 MiB (with the CRC of 1 MiB of zeros) and inflates to 2 GiB: the streaming
    # reader stops at the declared size, so the package is read whole with bounded memory.
    job = run_job(
        deployment, "docx-zip-bomb-lying-sizes", hostile.docx_zip_bomb(declared_mib=1), "liar.docx"
    )

    assert job["status"] == "completed", job
    assert job["result"]["chunks"] == 1
    texts = search_texts(deployment, "package bomb", "docx-zip-bomb-lying-sizes")
    assert texts == ["A package with a bomb inside."]
    assert_still_serving(deployment)


def test_100k_nested_divs_complete(deployment: Deployment) -> None:
    job = run_job(
        deployment,
        "html-100k-nested-divs",
        hostile.nested_divs_html(100_000, word="zanzibar"),
        "nested.html",
    )

    assert job["status"] == "completed", job
    assert job["result"]["chunks"] == 1
    assert search_texts(deployment, "zanzibar", "html-100k-nested-divs") == [
        "Deep inside the nest lies the word zanzibar.\n\n"
        "After the nest comes the closing paragraph."
    ]
    assert_still_serving(deployment)


ENCODING_CASES = [
    ("text-utf-16", "utf-16", "Größenordnung"),  # with a byte-order mark, as Notepad saves
    ("text-utf-16-le-no-bom", "utf-16-le", "Übergrößenträger"),
    ("text-windows-1252", "cp1252", "Déjà-vu-Façade"),
]


@pytest.mark.parametrize(
    ("case", "encoding", "word"), ENCODING_CASES, ids=[c[0] for c in ENCODING_CASES]
)
def test_legacy_and_utf16_text_decodes(
    deployment: Deployment, case: str, encoding: str, word: str
) -> None:
    text = hostile.prose([word])
    if encoding == "cp1252":  # characters windows-1252 has and Latin-1 does not
        text += "\u201cCurly quotes\u201d cost \u20ac5 \u2013 a dash.\n"
    data = text.encode(encoding)
    assert data.decode("utf-8", errors="replace") != text  # not readable as UTF-8

    job = run_job(deployment, case, data, f"{case}.txt")

    assert job["status"] == "completed", job
    texts = search_texts(deployment, word, case)
    assert len(texts) == 1 and word in texts[0], texts
    assert "Die Straßenbahn fährt über die Brücke." in texts[0]
    if encoding == "cp1252":
        assert "\u201cCurly quotes\u201d cost \u20ac5 \u2013 a dash." in texts[0]
    assert_still_serving(deployment)


def test_one_long_line_of_brackets_is_detected_in_linear_time(deployment: Deployment) -> None:
    # Format detection once scanned such a line from every bracket (quadratic: ~40 s for these
    # 64 KiB, minutes for 256 KiB), so this job hit the CPU limit; it is plain text.
    with CpuMeter(deployment.process.popen.pid) as cpu:
        job = run_job(deployment, "text-one-line-of-brackets", b"[" * 65_536, "brackets.txt")

    assert job["status"] == "completed", job
    assert job["result"]["format"] == "txt"
    assert job["result"]["chunks"] == 66
    # Quadratic detection burnt the whole CPU limit (above); linear takes a small part of it.
    assert cpu.seconds < EXTRACTION_CPU_SECONDS / 2, cpu.seconds
    assert_still_serving(deployment)


# --- external entities: nothing fetched, nothing leaked --------------------------------------


def test_docx_with_external_entities_is_refused_unread(
    deployment: Deployment, listener: Listener
) -> None:
    job = run_job(deployment, "docx-xxe", hostile.xxe_docx(listener.url), "xxe.docx")

    assert_failed(job, "corrupt_document", r"XML entity declarations \(a DOCTYPE\)")
    rendered = json.dumps(job)
    assert not any(line in rendered for line in passwd_lines())
    assert_still_serving(deployment)  # gives a fetch time to show up
    assert listener.connections == []


def test_docx_entities_in_a_part_not_named_xml_are_never_resolved(
    deployment: Deployment, listener: Listener
) -> None:
    # The DOCTYPE refusal looks at `.xml` and `.rels` members only; here the main document is
    # `word/main.part`, so python-docx's own parser meets the DOCTYPE. It resolves no entity,
    # loads no DTD and opens no connection: each reference is dropped, and with it the rest of
    # its run's text ("middle", "after"): the job completes with "Before" alone.
    job = run_job(
        deployment, "docx-xxe-renamed-part", hostile.xxe_docx_in_renamed_part(listener.url),
        "xxe2.docx",
    )  # fmt: skip

    assert job["status"] == "completed", job
    assert job["result"]["chunks"] == 1
    assert search_texts(deployment, "before", "docx-xxe-renamed-part") == ["Before"]
    assert_still_serving(deployment)
    assert listener.connections == []


# --- upload hardening -----------------------------------------------------------------------


def test_200_mb_upload_with_content_length_is_refused_before_the_body(
    deployment: Deployment,
) -> None:
    before = deployment.staged()
    declared = 200 * MiB
    head = (
        f"POST /v1/indexes/{INDEX}/documents HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        f"Content-Type: multipart/form-data; boundary={BOUNDARY}\r\n"
        f"Content-Length: {declared}\r\n\r\n"
    ).encode()
    started = time.monotonic()
    with (
        PeakRss(deployment.process.popen.pid) as rss,
        socket.create_connection(("127.0.0.1", deployment.env.port), timeout=30) as sock,
    ):
        # Only the head and the file part's headers: an answer proves no body was waited for.
        sock.sendall(head + part_head("huge.bin"))
        response = b""
        while chunk := sock.recv(65536):  # the server answers, then closes the connection
            response += chunk
    elapsed = time.monotonic() - started
    deployment.record(
        "upload-200-mb-content-length",
        f"HTTP 413, serve RSS {rss.baseline / MiB:.0f} MiB, peak +{rss.growth / MiB:.1f} MiB",
        elapsed,
    )

    status_line, _, rest = response.partition(b"\r\n")
    assert status_line.split()[1] == b"413", response
    body = json.loads(rest.partition(b"\r\n\r\n")[2])
    assert body["error"]["code"] == "upload_too_large"
    assert str(MAX_UPLOAD_BYTES) in body["error"]["message"]
    assert rss.growth < 50 * MiB
    assert deployment.staged() == before
    assert_still_serving(deployment)


def test_200_mb_chunked_upload_is_cut_off_while_streaming(deployment: Deployment) -> None:
    before = deployment.staged()
    block = os.urandom(MiB)
    sent = 0

    def body() -> Iterator[bytes]:
        nonlocal sent
        yield part_head("huge.bin")
        for _ in range(200):
            sent += len(block)
            yield block
        yield f"\r\n--{BOUNDARY}--\r\n".encode()

    started = time.monotonic()
    with PeakRss(deployment.process.popen.pid) as rss:
        response = deployment.api.http.post(
            f"/v1/indexes/{INDEX}/documents",
            content=body(),
            headers={"Content-Type": f"multipart/form-data; boundary={BOUNDARY}"},
        )
    elapsed = time.monotonic() - started
    deployment.record(
        "upload-200-mb-chunked",
        f"HTTP {response.status_code} after {sent / MiB:.0f} MiB sent, "
        f"serve RSS {rss.baseline / MiB:.0f} MiB, peak +{rss.growth / MiB:.1f} MiB",
        elapsed,
    )

    assert response.request.headers["Transfer-Encoding"] == "chunked"
    assert_error(response, 413, "upload_too_large")
    # The server stopped reading just past its limit: the client could not send the rest.
    assert MAX_UPLOAD_BYTES <= sent < 200 * MiB, sent
    assert rss.growth < 50 * MiB, f"serve RSS grew by {rss.growth / MiB:.0f} MiB"
    assert deployment.staged() == before
    assert_still_serving(deployment)


def test_traversal_filename_is_only_a_display_name(
    deployment: Deployment, tmp_path_factory: pytest.TempPathFactory
) -> None:
    root = tmp_path_factory.getbasetemp()
    passwd = Path("/etc/passwd")
    passwd_before = passwd.stat()
    noise = hostile.random_bytes(4096, seed=7)  # fails, so its staged upload is kept
    started = time.monotonic()

    response = deployment.api.upload(INDEX, noise, filename="../../etc/passwd")
    assert response.status_code == 202, response.text
    job_id = response.json()["job_id"]
    job = deployment.api.wait(job_id)
    deployment.record("filename-traversal", "stored as 'passwd'", time.monotonic() - started)

    assert (job["filename"], job["document_id"]) == ("passwd", "passwd")
    assert_failed(job, "unsupported_format", "binary data")
    assert (deployment.staging / job_id).read_bytes() == noise  # staged under the job's id
    assert all(JOB_ID.fullmatch(name) for name in deployment.staged())
    assert not list(root.rglob("passwd"))
    assert not (deployment.env.data_dir.parent / "etc").exists()
    assert (passwd.stat().st_mtime_ns, passwd.stat().st_size) == (
        passwd_before.st_mtime_ns,
        passwd_before.st_size,
    )
    assert_still_serving(deployment)


METADATA_CASES = [
    ("list", '["legal", "hr"]', "invalid_metadata", "must be a JSON object"),
    ("string", '"legal"', "invalid_metadata", "must be a JSON object"),
    ("number", "42", "invalid_metadata", "must be a JSON object"),
    ("broken-json", '{"department": ', "invalid_metadata", "not valid JSON"),
    ("reserved-sha256", '{"sha256": "0000"}', "invalid_metadata", "'sha256' is reserved"),
    ("reserved-document-id", '{"document_id": "x"}', "invalid_metadata", "reserved"),
    (
        "too-large-20-kb",
        json.dumps({f"note{i}": "x" * 1900 for i in range(11)}),
        "invalid_metadata",
        "the limit is 16384",
    ),
    # Past the multipart layer's bound on any one form field, before metadata is parsed.
    ("too-large-100-kb", json.dumps({"note": "x" * 100_000}), "invalid_upload", "65536"),
]


@pytest.mark.parametrize(
    ("case", "metadata", "code", "fragment"), METADATA_CASES, ids=[c[0] for c in METADATA_CASES]
)
def test_bad_metadata_is_refused_at_upload(
    deployment: Deployment, case: str, metadata: str, code: str, fragment: str
) -> None:
    before = deployment.staged()
    document_id = f"metadata-{case}"
    started = time.monotonic()

    response = deployment.api.upload(
        INDEX, b"Good text, bad metadata.", filename="note.txt", document_id=document_id,
        metadata=metadata,
    )  # fmt: skip

    deployment.record(f"metadata-{case}", f"HTTP 400 {code}", time.monotonic() - started)
    assert fragment in assert_error(response, 400, code)
    assert deployment.staged() == before
    jobs = deployment.api.http.get("/v1/jobs", params={"index": INDEX, "limit": 500}).json()
    assert not [job for job in jobs["jobs"] if job["document_id"] == document_id]
    assert_still_serving(deployment)


def test_the_server_stayed_up_throughout(deployment: Deployment) -> None:
    """After every case above: one process, never restarted, its log free of crashes, and no
    parsing child left behind (killed ones included): only the idle fork servers remain, at
    most one per job slot, each with no child of its own."""
    assert deployment.process.popen.poll() is None
    servers = [pid for pid, cmd in children(deployment.process.popen.pid) if "isolation" in cmd]
    assert len(servers) <= 2, servers  # DOCINGEST_WORKER_CONCURRENCY defaults to 2
    assert all(children(server) == [] for server in servers)
    log = deployment.process.log()
    assert "Traceback" not in log, log[-5000:]
    statuses = httpx.get(f"{deployment.env.base_url}/readyz", timeout=10)
    assert statuses.status_code == 200, statuses.text
