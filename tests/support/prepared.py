"""Prepared documents for tests: a file prepared whole in the limited child, and a stream of
chunks made up by a test (what indexing reads, without a file)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from docingest.pipeline.chunking import Chunk, ChunkingSpec
from docingest.pipeline.document import PageReporter
from docingest.pipeline.isolation.parent import Limits, open_prepared
from docingest.pipeline.metadata import CONTENT_KEYS
from docingest.pipeline.prepare import (
    CHUNK_BATCH,
    Chunks,
    Header,
    Part,
    PreparedStream,
    PrepareRequest,
    StageReporter,
    Summary,
)
from docingest.pipeline.settings import Settings


@dataclass(frozen=True, slots=True)
class WholeDocument:
    """What a stream came to once read to its end."""

    chunks: list[Chunk]
    metadata: dict[str, Any]


@contextmanager
def open_isolated(
    path: Path,
    *,
    filename: str,
    settings: Settings,
    chunking: ChunkingSpec | None = None,
    content_type: str | None = None,
    on_stage: StageReporter | None = None,
    on_page: PageReporter | None = None,
    should_cancel: Callable[[], bool] | None = None,
    limits: Limits | None = None,
) -> Iterator[PreparedStream]:
    """`open_prepared` of the file at `path` in a limited child process (whatever
    `settings.isolate_extraction` says), chunked as a new index would be unless `chunking`
    is given."""
    request = PrepareRequest(
        path,
        filename=filename,
        chunking=chunking or ChunkingSpec.from_settings(settings),
        content_type=content_type,
        on_stage=on_stage,
        on_page=on_page,
        should_cancel=should_cancel,
    )
    isolated = settings.model_copy(update={"isolate_extraction": True})
    with open_prepared(request, settings=isolated, limits=limits) as prepared:
        yield prepared


def prepare_isolated(path: Path, **options: Any) -> WholeDocument:
    """`open_isolated`, read whole."""
    with open_isolated(path, **options) as prepared:
        chunks = [chunk for batch in prepared.batches() for chunk in batch]
        return WholeDocument(chunks=chunks, metadata=prepared.metadata)


def stream_of(chunks: list[Chunk], metadata: dict[str, Any]) -> PreparedStream:
    """A `PreparedStream` of `chunks` whose document has `metadata`, all known before the
    first batch is read (as for a document prepared whole); the parts still come as the
    parsing child sends them, the summary before the chunks."""
    content = {key: metadata[key] for key in CONTENT_KEYS if key in metadata}
    header = Header({key: value for key, value in metadata.items() if key not in content})
    parts: list[Part] = [Summary(content, len(chunks))]
    parts += [
        Chunks(chunks[start : start + CHUNK_BATCH]) for start in range(0, len(chunks), CHUNK_BATCH)
    ]
    stream = PreparedStream(header, iter(parts))
    stream.metadata.update(content)
    stream.chunk_count = len(chunks)
    return stream
