"""Job fields on log lines: bound for a block, added to, copied into threads, written as JSON."""

from __future__ import annotations

import contextvars
import json
import logging
import sys
import threading

from docingest.pipeline import log as log_context
from docingest.pipeline.log import JobContextFilter, JsonFormatter


def record(message: str = "hello %s", *args: object) -> logging.LogRecord:
    return logging.LogRecord("docingest.test", logging.INFO, __file__, 1, message, args, None)


def filtered(entry: logging.LogRecord) -> logging.LogRecord:
    assert JobContextFilter().filter(entry)
    return entry


def fields(entry: logging.LogRecord) -> tuple[object, ...]:
    return tuple(getattr(entry, name) for name in ("job_id", "index", "document_id"))


def test_fields_hold_for_the_block_and_go_after_it() -> None:
    assert log_context.current() == {}
    with log_context.bound(job_id="j1"):
        log_context.add(index="legal", document_id="contract.pdf")
        assert fields(filtered(record())) == ("j1", "legal", "contract.pdf")
        with log_context.bound(job_id="j2"):
            assert log_context.current()["job_id"] == "j2"
        assert log_context.current()["job_id"] == "j1"
    assert log_context.current() == {}
    assert fields(filtered(record())) == (None, None, None)


def test_a_thread_started_in_a_copied_context_keeps_the_fields() -> None:
    seen: dict[str, dict[str, str]] = {}
    with log_context.bound(job_id="j3", index="docs"):
        copied = threading.Thread(
            target=contextvars.copy_context().run,
            args=(lambda: seen.setdefault("copied", log_context.current()),),
        )
        plain = threading.Thread(target=lambda: seen.setdefault("plain", log_context.current()))
        for thread in (copied, plain):
            thread.start()
            thread.join()
    assert seen["copied"] == {"job_id": "j3", "index": "docs"}
    assert seen["plain"] == {}  # why the heartbeat and embedding threads copy the context


def test_json_lines_carry_message_level_fields_and_exception() -> None:
    formatter = JsonFormatter()
    with log_context.bound(job_id="j4", index="docs", document_id="a.md"):
        line = json.loads(formatter.format(filtered(record("chunk %d of %d", 3, 7))))
    assert line["message"] == "chunk 3 of 7"
    assert line["level"] == "INFO" and line["logger"] == "docingest.test"
    assert (line["job_id"], line["index"], line["document_id"]) == ("j4", "docs", "a.md")
    assert line["time"].endswith("+00:00")

    try:
        raise ValueError("bad päge")
    except ValueError:
        failed = logging.LogRecord("x", logging.ERROR, __file__, 1, "failed", None, sys.exc_info())
    line = json.loads(formatter.format(filtered(failed)))
    assert "job_id" not in line
    assert "ValueError: bad päge" in line["exception"]
