"""mbox archives: one document whose sections are the messages, numbered as pages."""

from __future__ import annotations

import base64
import json
import subprocess
import sys
from pathlib import Path

import pytest

from docingest.pipeline.chunking import ChunkingSpec
from docingest.pipeline.detect import detect
from docingest.pipeline.document import BlockKind, DocumentFormat, ExtractedDocument
from docingest.pipeline.errors import DocumentTooLarge
from docingest.pipeline.extract import extract
from docingest.pipeline.isolation.child import MAP_MBOX_BYTES
from docingest.pipeline.prepare import prepare_document
from docingest.pipeline.settings import Settings
from tests.support.paths import CORPUS_DIR, REPO_DIR

SETTINGS = Settings(isolate_extraction=False)


def message(number: int, subject: str | None, body: str, *, extra: str = "") -> bytes:
    head = f"From sender{number}@example.org Mon Jan  1 00:00:{number % 60:02d} 2024\n"
    head += f"From: Sender {number} <sender{number}@example.org>\nTo: team@example.org\n"
    head += f"Date: Mon, 1 Jan 2024 10:{number % 60:02d}:00 +0000\n"
    if subject is not None:
        head += f"Subject: {subject}\n"
    return (head + extra + "\n" + body + "\n\n").encode()


def _read(data: bytes, settings: Settings = SETTINGS) -> ExtractedDocument:
    return extract(data, detect(data, filename="archive.mbox"), settings=settings)


def test_each_message_is_a_section_headed_by_its_subject_on_its_own_page() -> None:
    data = (
        message(1, "Kick-off", "We start on Monday.")
        + message(2, None, "No subject here.\n>From the archive: an escaped line.")
        + message(3, "Wrap-up", "Thanks all.")
    )
    document = _read(data)
    assert document.format is DocumentFormat.MBOX
    assert document.pages == 3 and document.extra["messages"] == 3
    assert [(b.kind, b.level, b.text, b.page) for b in document.blocks] == [
        (BlockKind.HEADING, 1, "Kick-off", 1),
        (BlockKind.PARAGRAPH, 0, "We start on Monday.", 1),
        (BlockKind.HEADING, 1, "Message 2", 2),
        (BlockKind.PARAGRAPH, 0, "No subject here.\nFrom the archive: an escaped line.", 2),
        (BlockKind.HEADING, 1, "Wrap-up", 3),
        (BlockKind.PARAGRAPH, 0, "Thanks all.", 3),
    ]


def test_attachments_are_sections_under_their_message() -> None:
    eml = (CORPUS_DIR / "eml/fake-email-attachment.eml").read_bytes()
    data = message(1, "First", "Plain.") + b"From x@example.org Mon Jan  1 00:00:00 2024\n" + eml
    document = _read(data)
    headings = [(b.level, b.text, b.page) for b in document.blocks if b.kind is BlockKind.HEADING]
    assert headings[0] == (1, "First", 1)
    assert headings[1][0] == 1 and headings[1][2] == 2  # the second message's subject
    assert any(level == 2 and page == 2 for level, _, page in headings[2:])  # its attachment


def test_an_archive_past_the_message_limit_is_too_large_before_any_is_parsed() -> None:
    data = b"".join(message(n, f"Subject {n}", "Body.") for n in range(1, 12))
    with pytest.raises(DocumentTooLarge, match="more than 10 messages"):
        _read(data, Settings(isolate_extraction=False, max_mbox_messages=10))
    assert _read(data, Settings(isolate_extraction=False, max_mbox_messages=11)).pages == 11


def test_a_million_empty_messages_are_refused_by_the_default_limit() -> None:
    empty = (
        b"From a@b Mon Jan  1 00:00:00 2024\nFrom: a@b\nDate: Mon, 1 Jan 2024 00:00:00 +0000\n\n"
    )
    data = empty * 1_000_000
    assert detect(data).format is DocumentFormat.MBOX
    with pytest.raises(DocumentTooLarge, match="more than 20,000 messages"):
        _read(data)


def tiny_messages(count: int) -> bytes:
    """An mbox of `count` one-line messages, each its own subject (a chunk each)."""
    return b"".join(
        b"From a@b Mon Jan  1 00:00:00 2024\nFrom: a@b\nSubject: note %d\n\nhi %d\n\n" % (n, n)
        for n in range(count)
    )


def test_the_message_cap_can_be_reached_under_the_chunk_cap() -> None:
    """Issue 40: 50,000 tiny messages (under the then 100,000-message cap) failed on the
    20,000-chunk cap, so the documented message cap could never be reached. At the message cap
    an archive of the tiniest messages is still within the chunk cap; past it, the message cap
    speaks first, from the scan of separators."""
    settings = Settings(isolate_extraction=False)
    assert settings.max_mbox_messages <= settings.max_chunks_per_document
    at_cap = prepare_document(
        tiny_messages(settings.max_mbox_messages), filename="notes.mbox", settings=settings,
        chunking=ChunkingSpec(),
    )  # fmt: skip
    assert len(at_cap.chunks) <= settings.max_chunks_per_document
    with pytest.raises(DocumentTooLarge, match="more than 20,000 messages"):
        prepare_document(tiny_messages(50_000), filename="notes.mbox", settings=settings,
                         chunking=ChunkingSpec())  # fmt: skip


def test_a_message_cap_past_the_chunk_cap_counts_up_to_the_chunk_cap() -> None:
    """Lowering the chunk cap lowers the messages an archive may hold with it."""
    settings = Settings(isolate_extraction=False, max_mbox_messages=100_000,
                        max_chunks_per_document=40)  # fmt: skip
    assert settings.mbox_message_limit == 40
    with pytest.raises(DocumentTooLarge, match="more than 40 messages"):
        _read(tiny_messages(41), settings)
    assert _read(tiny_messages(40), settings).pages == 40


_PEAK = """
import json, mmap, resource, sys
from pathlib import Path
from docingest.pipeline.chunking import ChunkingSpec
from docingest.pipeline.isolation.child import _read_upload
from docingest.pipeline.prepare import Preparer
from docingest.pipeline.settings import Settings
settings = Settings(isolate_extraction=False, max_chunks_per_document=1_000_000)
preparer = Preparer.start(_read_upload(Path(sys.argv[1])), filename="a.mbox", settings=settings,
                          chunking=ChunkingSpec.from_settings(settings))
chunks = sum(1 for _ in preparer.chunks())
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
print(json.dumps({"chunks": chunks, "peak": peak}))
"""


def _peak(path: Path) -> dict[str, int]:
    result = subprocess.run(
        [sys.executable, "-c", _PEAK, str(path)], cwd=REPO_DIR, capture_output=True, text=True
    )
    assert result.returncode == 0, result.stderr[-2000:]
    return dict(json.loads(result.stdout))


def _with_attachment(number: int) -> bytes:
    """A message with a short text and 64 KB of attachment in a format not extracted: many
    bytes, little text (the chunker's work stays small)."""
    payload = base64.encodebytes(bytes(range(256)) * 256).decode()
    mime = 'MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary="b"\n'
    body = (
        f"--b\nContent-Type: text/plain\n\nReport {number}: the figures are attached.\n"
        "--b\nContent-Type: application/octet-stream\n"
        'Content-Disposition: attachment; filename="figures.bin"\n'
        f"Content-Transfer-Encoding: base64\n\n{payload}--b--\n"
    )
    return message(number, f"Report {number}", body, extra=mime)


def test_a_large_archive_is_streamed_not_held_in_memory(tmp_path: Path) -> None:
    small, large = tmp_path / "small.mbox", tmp_path / "large.mbox"
    for path, count in ((small, 300), (large, 1_200)):
        with path.open("wb") as file:
            for number in range(1, count + 1):
                file.write(_with_attachment(number))
    assert small.stat().st_size > MAP_MBOX_BYTES  # both read through the memory map
    small_run, large_run = _peak(small), _peak(large)
    assert large_run["chunks"] > 3 * small_run["chunks"]
    grown = large_run["peak"] - small_run["peak"]
    added = large.stat().st_size - small.stat().st_size
    # Four times the archive (some 75 MB more) adds far less than the bytes it adds: the
    # archive is mapped and released as it is read, and messages are parsed one at a time.
    assert grown < added / 4, (grown, added)
