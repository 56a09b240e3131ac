"""The child side of `pipeline.isolation`: `python -m pipeline.isolation_child MEM CPU`.

Limits are set before any parser is imported; the request comes as one JSON line on stdin,
and progress and the outcome go back as JSON lines on stdout (never pickle: the parent must
not trust what a process that parsed hostile bytes says beyond plain data).
"""

from __future__ import annotations

import json
import resource
import signal
import sys
from typing import Any

PR_SET_PDEATHSIG = 1


def _limit(memory_bytes: int, cpu_seconds: int) -> None:
    resource.setrlimit(resource.RLIMIT_AS, (memory_bytes, memory_bytes))
    resource.setrlimit(resource.RLIMIT_CPU, (cpu_seconds, cpu_seconds + 5))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    try:  # die with the worker that started us (Linux); elsewhere the CPU limit bounds us
        import ctypes

        ctypes.CDLL(None).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    except (OSError, AttributeError):
        pass


def _send(message: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(message, ensure_ascii=False) + "\n")
    sys.stdout.flush()


def _error(error: Exception, code: str, message: str) -> dict[str, Any]:
    return {"error": {"class": type(error).__name__, "code": code, "message": message}}


def main(argv: list[str]) -> int:
    memory_bytes, cpu_seconds = int(argv[0]), int(argv[1])
    _limit(memory_bytes, cpu_seconds)
    request = json.loads(sys.stdin.readline())

    from pathlib import Path

    from pipeline.errors import CorruptDocument, DocumentTooLarge, IngestError
    from pipeline.prepare import prepare_document
    from pipeline.settings import Settings
    from pipeline.store_models import ChunkingSpec

    try:
        settings = Settings(**request["settings"])
        data = Path(request["path"]).read_bytes()
        prepared = prepare_document(
            data,
            filename=request["filename"],
            settings=settings,
            content_type=request["content_type"],
            chunking=ChunkingSpec(**request["chunking"]),
            on_stage=lambda name: _send({"stage": name}),
            on_page=lambda done, total: _send({"page": [done, total]}),
        )
        del data
        chunks = [
            [c.index, c.text, c.start, c.end, c.page_start, c.page_end, list(c.headings)]
            for c in prepared.chunks
        ]
        _send({"done": {"metadata": prepared.metadata, "chunks": chunks}})
    except IngestError as exc:
        _send(_error(exc, exc.code, exc.message))
    except MemoryError:
        limit = memory_bytes // 2**20
        error: IngestError = DocumentTooLarge(
            f"Extracting this file needs more than the {limit} MiB allowed; it may be a "
            "decompression bomb, or split it into smaller files."
        )
        _send(_error(error, error.code, error.message))
    except RecursionError:
        error = CorruptDocument("The file's structure nests too deeply to parse.")
        _send(_error(error, error.code, error.message))
    except Exception as exc:  # report as a damaged file; the parent logs nothing secret
        detail = f"{type(exc).__name__}: {exc}"[:300]
        error = CorruptDocument(f"The parser failed on this file: {detail}")
        _send(_error(error, error.code, error.message))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
