"""Hostile legacy Office, RTF, Outlook and mbox files through one real `docingest serve`
(issue 26).

The same deployment and limits as the other hostile suites (`hostile_service.LIMITS`): each
input gets its exact outcome, a clear code, from the parsing child under its CPU, memory and
wall limits; after each the worker completes a small good job while the server stays up
(nothing lost). No wall-clock bound: the limits are the child's, and a case that ran past
them would fail with `timeout`, not the code asserted here.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support import legacy_files, ole2_files
from tests.support.hostile_service import (
    MAX_UPLOAD_BYTES,
    Deployment,
    assert_failed,
    assert_still_serving,
    deployed,
    run_job,
    search_texts,
)
from tests.support.paths import CORPUS_DIR


@pytest.fixture(scope="module")
def deployment(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Deployment]:
    with deployed(tmp_path_factory.mktemp("hostile-legacy") / "data") as running:
        yield running


@pytest.fixture(scope="module")
def doc(tmp_path_factory: pytest.TempPathFactory) -> bytes:
    source = CORPUS_DIR / "docx/tika-sample-word-document.docx"
    return legacy_files.convert(source, "doc", tmp_path_factory.mktemp("doc")).read_bytes()


def test_an_ole2_fat_pointing_at_itself_is_corrupt(deployment: Deployment) -> None:
    data = ole2_files.with_fat_loop(
        ole2_files.msg(subject="S", body="x" * 5000), self_pointing=True
    )
    job = run_job(deployment, "ole2-fat-self-loop", data, "loop.msg")
    assert_failed(job, "corrupt_document", r"sector chain loops")
    assert_still_serving(deployment)


def test_an_ole2_chain_looping_back_and_a_directory_loop_are_corrupt(
    deployment: Deployment,
) -> None:
    message = ole2_files.msg(subject="S", body="x" * 5000)
    looped = ole2_files.with_fat_loop(message, self_pointing=False)
    job = run_job(deployment, "ole2-chain-loop", looped, "chain.msg")
    assert_failed(job, "corrupt_document", r"runs past its declared size")
    job = run_job(
        deployment, "ole2-directory-loop", ole2_files.with_directory_loop(message), "d.msg"
    )
    assert_failed(job, "corrupt_document", r"OLE2 compound file is damaged")
    assert_still_serving(deployment)


def test_a_doc_declaring_4_gib_of_text_is_corrupt(deployment: Deployment, doc: bytes) -> None:
    data = bytearray(doc)
    fib = data.find(b"\xec\xa5")  # wIdent: the WordDocument stream's first bytes
    struct.pack_into("<I", data, fib + 0x4C, 0xFFFFFFFF)  # FibRgLw97.ccpText
    job = run_job(deployment, "doc-4-gib-text", bytes(data), "huge.doc")
    assert_failed(job, "corrupt_document", r"declares 4,294,967,295 characters of text")
    assert_still_serving(deployment)


def test_an_rtf_nested_100000_groups_deep_is_corrupt(deployment: Deployment) -> None:
    data = b"{\\rtf1\\ansi " + b"{" * 100_000 + b"deep" + b"}" * 100_000 + b"}"
    job = run_job(deployment, "rtf-100000-groups", data, "deep.rtf")
    assert_failed(job, "corrupt_document", r"nests 100,001 groups deep")
    assert_still_serving(deployment)


def test_a_msg_nesting_200_attached_messages_is_read_to_the_depth_limit(
    deployment: Deployment,
) -> None:
    job = run_job(deployment, "msg-200-nested", ole2_files.nested_msg(200), "nested.msg")
    assert job["status"] == "completed", job
    assert job["result"]["format"] == "msg"
    texts = search_texts(deployment, "innermost message level", "msg-200-nested")
    assert any("Message level 3." in text for text in texts), texts  # the default depth, 3
    assert not any("Message level 4." in text for text in texts), texts
    assert_still_serving(deployment)


def test_an_mbox_of_a_million_empty_messages_is_too_large(deployment: Deployment) -> None:
    empty = (
        b"From a@b Mon Jan  1 00:00:00 2024\nFrom: a@b\nDate: Mon, 1 Jan 2024 00:00:00 +0000\n\n"
    )
    data = empty * 1_000_000
    assert len(data) < MAX_UPLOAD_BYTES
    job = run_job(deployment, "mbox-million-empty", data, "empty.mbox")
    assert_failed(job, "document_too_large", r"more than 20,000 messages")
    assert_still_serving(deployment)


def test_an_mbox_of_50000_tiny_messages_fails_on_its_message_cap(deployment: Deployment) -> None:
    """Issue 40: it failed on the 20,000-chunk cap after parsing every message, below the
    documented message cap; now the message cap (within the chunk cap) speaks first."""
    data = b"".join(
        b"From a@b Mon Jan  1 00:00:00 2024\nFrom: a@b\nSubject: note %d\n\nhi %d\n\n" % (n, n)
        for n in range(50_000)
    )
    job = run_job(deployment, "mbox-50000-tiny", data, "notes.mbox")
    assert_failed(job, "document_too_large", r"more than 20,000 messages")
    assert_still_serving(deployment)


def test_an_xls_of_65536_by_256_cells_is_too_large(deployment: Deployment, tmp_path: Path) -> None:
    path = tmp_path / "grid.xls"
    path.write_bytes(ole2_files.xls(65_536, 256))
    assert path.stat().st_size < MAX_UPLOAD_BYTES
    job = run_job(deployment, "xls-65536x256", path, "grid.xls")
    assert_failed(job, "document_too_large", r"holds 16,777,216 filled cells")
    assert_still_serving(deployment)
