"""Which job a log line belongs to, the JSON log format that shows it, and the set-up of
every docingest process's logging (`configure_logging`).

`bound(job_id=...)` puts fields in a context variable for the rest of a block (and `add` adds
more, such as the index once the job has been read); `JobContextFilter` copies them onto every
log record, so a line logged anywhere below the job runner carries them without being passed
anything. Threads do not inherit context variables: a thread started for a job runs under
`contextvars.copy_context().run` to keep them (the heartbeat and the embedding pool do).
"""

from __future__ import annotations

import json
import logging
import sys
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from datetime import UTC, datetime
from types import MappingProxyType

FIELDS = ("job_id", "index", "document_id")
"""The context fields, in the order they are written."""
LOG_HANDLER = "docingest"
"""Name of the root handler `configure_logging` installs (found again by it)."""
TEXT_LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"

_NONE: Mapping[str, str] = MappingProxyType({})
_context: ContextVar[Mapping[str, str]] = ContextVar("docingest_log_context", default=_NONE)


@contextmanager
def bound(**fields: str) -> Iterator[None]:
    """Attach `fields` to every log line of this context until the block ends."""
    token = _context.set({**_context.get(), **fields})
    try:
        yield
    finally:
        _context.reset(token)


def add(**fields: str) -> None:
    """Attach more fields inside a `bound` block (they go when the block ends)."""
    _context.set({**_context.get(), **fields})


def current() -> dict[str, str]:
    """The fields attached now (a copy)."""
    return dict(_context.get())


class JobContextFilter(logging.Filter):
    """Set `job_id`, `index` and `document_id` on each record (None outside a job)."""

    def filter(self, record: logging.LogRecord) -> bool:
        context = _context.get()
        for name in FIELDS:
            if not hasattr(record, name):
                setattr(record, name, context.get(name))
        return True


class JsonFormatter(logging.Formatter):
    """One JSON object per line: time, level, logger, message, process, the job fields."""

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, object] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
            "process": record.process,
        }
        for name in FIELDS:
            value = getattr(record, name, None)
            if value is not None:
                entry[name] = value
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        if record.stack_info:
            entry["stack"] = self.formatStack(record.stack_info)
        return json.dumps(entry, ensure_ascii=False, default=str)


def configure_logging(level: str, *, log_format: str = "text") -> None:
    """Log to stderr at `level`, as text or one JSON object a line (`log_format`).

    Calling it again changes the format of the same handler; lines logged inside a job carry
    its fields (`JobContextFilter`).
    """
    root = logging.getLogger()
    handler = next((h for h in root.handlers if h.get_name() == LOG_HANDLER), None)
    if handler is None:
        handler = logging.StreamHandler(sys.stderr)
        handler.set_name(LOG_HANDLER)
        handler.addFilter(JobContextFilter())
        root.addHandler(handler)
    json_lines = log_format == "json"
    handler.setFormatter(JsonFormatter() if json_lines else logging.Formatter(TEXT_LOG_FORMAT))
    root.setLevel(level.upper())
