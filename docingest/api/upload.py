"""Receive a `multipart/form-data` upload by streaming its file part straight to disk.

The body is never held whole. Each chunk of `request.stream()` is fed to python-multipart's
streaming parser, whose callbacks (`_Parts`) check every part as it goes: the bytes of the
`file` part are queued and written to the staging file (and hashed) before the next chunk is
read, so memory holds at most one network chunk of it; every other part is a small text field
kept in memory under a bound. Size limits hold with or without a Content-Length: a declared
length over the limit is refused before a byte of the body is read, and a chunked body is
counted as it arrives. On any failure (a bad body, a limit, the client going away, or the
request being cancelled) the partial staging file is removed.
"""

from __future__ import annotations

import errno
import hashlib
import unicodedata
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, BinaryIO

import anyio.to_thread
from python_multipart.exceptions import FormParserError
from python_multipart.multipart import MultipartParser, MultipartState, parse_options_header
from starlette.requests import ClientDisconnect, Request

from docingest.pipeline.errors import InvalidUpload, StagingFull, UploadTooLarge
from docingest.pipeline.ingest.staging import CHECK_EVERY_BYTES

if TYPE_CHECKING:
    from python_multipart.multipart import MultipartCallbacks

BODY_OVERHEAD_BYTES = 64 * 1024
"""What a body may carry beyond its file and text fields: boundaries and part headers."""

DEFAULT_FILENAME = "upload"
"""The display name of a file part sent without a usable filename."""

MAX_FILENAME_CHARS = 255
"""The longest display filename, in characters (the usual file system limit on a name)."""


@dataclass(frozen=True, slots=True)
class ReceivedUpload:
    """An upload staged on disk, with the form's other fields."""

    path: Path
    """The staged file: the `destination` the caller chose."""
    filename: str
    """The client's filename made safe for display (see `display_filename`); never a path."""
    content_type: str | None
    """The file part's declared Content-Type, a hint only."""
    size: int
    """Bytes written."""
    sha256: str
    """Hex sha256 of the bytes written, computed while streaming."""
    fields: dict[str, str]
    """The form's text fields (e.g. `document_id`, `metadata`, `force`)."""


async def receive_upload(
    request: Request,
    *,
    destination: Path,
    max_file_bytes: int,
    max_field_bytes: int = 64 * 1024,
    max_fields: int = 16,
    max_header_bytes: int = 8 * 1024,
    file_field: str = "file",
    check_room: Callable[[int], None] | None = None,
) -> ReceivedUpload:
    """Stream the request's multipart body, staging its `file_field` part at `destination`.

    Raise `UploadTooLarge` when the file (or the whole body) exceeds its limit,
    `StagingFull` when `check_room(more_bytes)` raises it (asked before the body is read,
    with its declared length, and again every `CHECK_EVERY_BYTES` written) or the disk fills,
    and `InvalidUpload` for anything else wrong with the body, the client's disconnection
    included; the destination is gone after any of them. An empty file is not an error here.
    """
    boundary = _boundary(request, file_field)
    body_limit = max_file_bytes + max_fields * max_field_bytes + BODY_OVERHEAD_BYTES
    declared = _content_length(request)
    if declared is not None and declared > body_limit:
        raise UploadTooLarge(_too_large_message(max_file_bytes))
    if check_room is not None:  # a directory scan: off the event loop
        await anyio.to_thread.run_sync(check_room, declared or 0)

    parts = _Parts(
        file_field=file_field,
        max_file_bytes=max_file_bytes,
        max_field_bytes=max_field_bytes,
        max_fields=max_fields,
        max_header_bytes=max_header_bytes,
    )
    try:
        parser = MultipartParser(boundary, parts.callbacks(), max_header_size=max_header_bytes)
    except FormParserError as exc:  # e.g. a boundary longer than RFC 2046 allows
        raise InvalidUpload(f"The multipart boundary is not acceptable: {exc}.") from exc

    hasher = hashlib.sha256()
    # Created in the event loop, not a thread: a cancellation while a thread opened it would
    # lose the handle and leave the file behind. Creating one file is a short metadata write.
    file = _create(destination)
    try:
        with file:
            await _pump(
                request,
                parser,
                parts,
                file=file,
                hasher=hasher,
                body_limit=body_limit,
                check_room=check_room,
            )
    except BaseException:
        # Synchronous on purpose: this also runs when the request task is cancelled, where
        # an await would be cancelled again before the file is gone.
        destination.unlink(missing_ok=True)
        raise
    return ReceivedUpload(
        path=destination,
        filename=parts.filename,
        content_type=parts.content_type,
        size=parts.file_bytes,
        sha256=hasher.hexdigest(),
        fields=parts.fields,
    )


def _boundary(request: Request, file_field: str) -> bytes:
    """The multipart boundary of the request's Content-Type; `InvalidUpload` if it has none."""
    media_type, params = parse_options_header(request.headers.get("content-type"))
    if media_type != b"multipart/form-data":
        raise InvalidUpload(
            f"Send the upload as multipart/form-data with the document in '{file_field}'."
        )
    boundary = params.get(b"boundary")
    if not boundary:
        raise InvalidUpload("The multipart/form-data Content-Type header has no boundary.")
    return boundary


def display_filename(raw: str | None) -> str:
    """Return a client filename fit for display: its last path segment, no control characters.

    Both `/` and `\\` count as separators; format and control characters (including bidi
    overrides) are dropped; the result is at most 255 characters, keeping a short extension.
    Never use it to build a path. Browsers send a `"` in a filename as `%22` (WHATWG's
    multipart encoding); it is decoded back.
    """
    if not raw:
        return DEFAULT_FILENAME
    name = raw.replace("%22", '"').replace("\\", "/").rsplit("/", 1)[-1]
    name = "".join(char for char in name if not unicodedata.category(char).startswith("C"))
    name = name.strip()
    if name in {"", ".", ".."}:
        return DEFAULT_FILENAME
    if len(name) > MAX_FILENAME_CHARS:
        suffix = PurePosixPath(name).suffix
        if len(suffix) > 16:
            suffix = ""
        name = name[: MAX_FILENAME_CHARS - len(suffix)] + suffix
    return name


async def _pump(
    request: Request,
    parser: MultipartParser,
    parts: _Parts,
    *,
    file: BinaryIO,
    hasher: hashlib._Hash,
    body_limit: int,
    check_room: Callable[[int], None] | None,
) -> None:
    """Feed the body to the parser, writing the file part's bytes as each chunk is parsed."""
    received = 0
    checked_at = 0  # file bytes when the room was last checked
    try:
        async for chunk in request.stream():
            received += len(chunk)
            if received > body_limit:
                raise UploadTooLarge(_too_large_message(parts.max_file_bytes))
            parser.write(chunk)
            if parts.pending:
                # Disk writes can stall (a busy or network disk); in a worker thread they never
                # hold up the event loop. One hop per network chunk (tens of KiB) costs far
                # less than the write itself, and hashing there runs outside the GIL too.
                await anyio.to_thread.run_sync(_write, file, hasher, parts.take_pending())
                if check_room is not None and parts.file_bytes - checked_at >= CHECK_EVERY_BYTES:
                    checked_at = parts.file_bytes
                    await anyio.to_thread.run_sync(check_room, 0)  # counts this file as written
        parser.finalize()
    except ClientDisconnect as exc:
        raise InvalidUpload("The client disconnected before the upload was complete.") from exc
    except FormParserError as exc:
        raise InvalidUpload(f"The multipart body is malformed: {exc}.") from exc
    if parser.state != MultipartState.END:
        raise InvalidUpload("The multipart body ended before its closing boundary.")
    if not parts.file_seen:
        raise InvalidUpload(f"The form has no '{parts.file_field}' part with the document.")


class _Parts:
    """The parser's callbacks: check each part, keep text fields, queue the file's bytes."""

    def __init__(
        self,
        *,
        file_field: str,
        max_file_bytes: int,
        max_field_bytes: int,
        max_fields: int,
        max_header_bytes: int,
    ) -> None:
        self.file_field = file_field
        self.max_file_bytes = max_file_bytes
        self.max_field_bytes = max_field_bytes
        self.max_fields = max_fields
        self.max_header_bytes = max_header_bytes
        self.fields: dict[str, str] = {}
        self.file_seen = False
        self.filename = DEFAULT_FILENAME
        self.content_type: str | None = None
        self.file_bytes = 0
        self.pending: list[bytes] = []
        self._in_file = False
        self._field_name = ""
        self._field_value = bytearray()
        self._headers: dict[bytes, bytes] = {}
        self._header_name = bytearray()
        self._header_value = bytearray()
        self._header_bytes = 0

    def callbacks(self) -> MultipartCallbacks:
        """Return the callbacks to hand to `MultipartParser`."""
        return {
            "on_part_begin": self._on_part_begin,
            "on_header_field": self._on_header_field,
            "on_header_value": self._on_header_value,
            "on_header_end": self._on_header_end,
            "on_headers_finished": self._on_headers_finished,
            "on_part_data": self._on_part_data,
            "on_part_end": self._on_part_end,
        }

    def take_pending(self) -> list[bytes]:
        """Return the file bytes parsed since the last call, and forget them."""
        pending, self.pending = self.pending, []
        return pending

    def _on_part_begin(self) -> None:
        self._headers = {}
        self._header_bytes = 0

    def _count_header_bytes(self, count: int) -> None:
        self._header_bytes += count
        if self._header_bytes > self.max_header_bytes:
            raise InvalidUpload(f"A part's headers exceed {self.max_header_bytes} bytes.")

    def _on_header_field(self, data: bytes, start: int, end: int) -> None:
        self._count_header_bytes(end - start)
        self._header_name += data[start:end]

    def _on_header_value(self, data: bytes, start: int, end: int) -> None:
        self._count_header_bytes(end - start)
        self._header_value += data[start:end]

    def _on_header_end(self) -> None:
        self._headers[bytes(self._header_name).lower()] = bytes(self._header_value)
        self._header_name.clear()
        self._header_value.clear()

    def _on_headers_finished(self) -> None:
        disposition, options = parse_options_header(self._headers.get(b"content-disposition"))
        raw_name = options.get(b"name")
        if disposition != b"form-data" or raw_name is None:
            raise InvalidUpload("Each part needs a 'Content-Disposition: form-data; name=' header.")
        name = _decode(raw_name)
        if name == self.file_field:
            if self.file_seen:
                raise InvalidUpload(f"Send one '{self.file_field}' part per upload, not several.")
            self.file_seen = self._in_file = True
            self.filename = display_filename(_decode(options.get(b"filename", b"")))
            declared = self._headers.get(b"content-type", b"").decode("latin-1").strip()
            self.content_type = declared or None
            return
        if name in self.fields:
            raise InvalidUpload(f"The form field '{name}' is given more than once.")
        if len(self.fields) >= self.max_fields:
            raise InvalidUpload(f"The form has more than {self.max_fields} fields.")
        self._field_name = name
        self._field_value.clear()

    def _on_part_data(self, data: bytes, start: int, end: int) -> None:
        if self._in_file:
            self.file_bytes += end - start
            if self.file_bytes > self.max_file_bytes:
                raise UploadTooLarge(_too_large_message(self.max_file_bytes))
            self.pending.append(data[start:end])
            return
        if len(self._field_value) + (end - start) > self.max_field_bytes:
            raise InvalidUpload(
                f"The form field '{self._field_name}' exceeds {self.max_field_bytes} bytes."
            )
        self._field_value += data[start:end]

    def _on_part_end(self) -> None:
        if self._in_file:
            self._in_file = False
            return
        try:
            self.fields[self._field_name] = self._field_value.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise InvalidUpload(f"The form field '{self._field_name}' is not UTF-8 text.") from exc


def _content_length(request: Request) -> int | None:
    raw = request.headers.get("content-length")
    if raw is None:
        return None
    try:
        length = int(raw)
    except ValueError:
        length = -1
    if length < 0:
        raise InvalidUpload("The Content-Length header is not a byte count.")
    return length


def _too_large_message(max_file_bytes: int) -> str:
    return f"The upload exceeds the limit of {max_file_bytes} bytes; send a smaller file."


def _decode(raw: bytes) -> str:
    """Decode a part header parameter: UTF-8 as browsers send it, else Latin-1 as HTTP allows."""
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return raw.decode("latin-1")


def _create(destination: Path) -> BinaryIO:
    """Create the staging file; never replace one (the caller's name must be fresh)."""
    destination.parent.mkdir(parents=True, exist_ok=True)
    return destination.open("xb")


def _write(file: BinaryIO, hasher: hashlib._Hash, chunks: list[bytes]) -> None:
    try:
        for chunk in chunks:
            file.write(chunk)
            hasher.update(chunk)
    except OSError as exc:
        if exc.errno in (errno.ENOSPC, errno.EDQUOT):
            raise StagingFull("The staging area's disk is full; retry later.") from exc
        raise
