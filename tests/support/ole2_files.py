"""Write OLE2 compound files (MS-CFB, version 3) at test time: Outlook messages, a minimal
Excel workbook, and the damaged ones the reliability suite needs.

No library writes compound files from scratch (olefile only rewrites streams in place), and
the corpus has no `.msg`: this writer lays out the format plainly (a header, the FAT with
DIFAT sectors past 109 FAT sectors, a MiniFAT and mini stream for streams under 4 KiB, a
directory whose siblings hang off right-pointers), enough for olefile, xlrd and LibreOffice.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

MAGIC = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1"
SECTOR, MINI, CUTOFF = 512, 64, 4096
FREE, END, FATSECT, DIFSECT = 0xFFFFFFFF, 0xFFFFFFFE, 0xFFFFFFFD, 0xFFFFFFFC
NOSTREAM = 0xFFFFFFFF


@dataclass
class Storage:
    """A storage: named streams (bytes) and storages, in order."""

    entries: dict[str, bytes | Storage] = field(default_factory=dict)

    def add(self, name: str, value: bytes | Storage) -> Storage:
        self.entries[name] = value
        return self


@dataclass
class _Entry:
    name: str
    kind: int  # 1 storage, 2 stream, 5 root
    data: bytes = b""
    children: list[int] = field(default_factory=list)
    start: int = END
    size: int = 0


def build(root: Storage) -> bytes:
    """The compound file holding `root`'s tree."""
    entries = [_Entry("Root Entry", 5)]
    _flatten(root, 0, entries)
    sectors: list[bytes] = []
    fat: list[int] = []

    def chain(data: bytes) -> int:
        count = max(1, -(-len(data) // SECTOR))
        first = len(sectors)
        for index in range(count):
            sectors.append(data[index * SECTOR : (index + 1) * SECTOR].ljust(SECTOR, b"\0"))
            fat.append(first + index + 1 if index < count - 1 else END)
        return first

    mini = bytearray()
    minifat: list[int] = []
    for entry in entries[1:]:
        if entry.kind != 2:
            continue
        entry.size = len(entry.data)
        if not entry.data:
            entry.start = END
        elif len(entry.data) < CUTOFF:
            count = -(-len(entry.data) // MINI)
            entry.start = len(minifat)
            minifat += [entry.start + i + 1 if i < count - 1 else END for i in range(count)]
            mini += entry.data.ljust(count * MINI, b"\0")
        else:
            entry.start = chain(entry.data)
    root_entry = entries[0]
    if mini:
        root_entry.start, root_entry.size = chain(bytes(mini)), len(mini)
    minifat_start = chain(struct.pack(f"<{len(minifat)}I", *minifat)) if minifat else END
    minifat_sectors = -(-len(minifat) * 4 // SECTOR) if minifat else 0
    directory = _directory(entries)
    directory += _empty_entry() * ((-len(entries)) % 4)
    directory_start = chain(directory)
    fat_count, difat_count = _fat_layout(len(sectors))
    fat_first = len(sectors)
    fat += [FATSECT] * fat_count + [DIFSECT] * difat_count
    fat += [FREE] * (fat_count * 128 - len(fat))
    fat_bytes = struct.pack(f"<{len(fat)}I", *fat)
    fat_ids = list(range(fat_first, fat_first + fat_count))
    body = b"".join(sectors) + fat_bytes
    difat_first = fat_first + fat_count
    body += _difat_sectors(fat_ids[109:], difat_first)
    header = _header(
        fat_ids, fat_count, directory_start, minifat_start, minifat_sectors,
        difat_first if difat_count else END, difat_count,
    )  # fmt: skip
    return header + body


def _flatten(storage: Storage, parent: int, entries: list[_Entry]) -> None:
    for name, value in storage.entries.items():
        index = len(entries)
        entries[parent].children.append(index)
        if isinstance(value, Storage):
            entries.append(_Entry(name, 1))
            _flatten(value, index, entries)
        else:
            entries.append(_Entry(name, 2, value))


def _directory(entries: list[_Entry]) -> bytes:
    """The directory: each storage's children as a balanced tree in CFB order (shorter names
    first, then by upper-case name), as Office writes it."""
    left: dict[int, int] = {}
    right: dict[int, int] = {}
    child: dict[int, int] = {}
    for index, entry in enumerate(entries):
        kids = sorted(entry.children, key=lambda k: (len(entries[k].name), entries[k].name.upper()))
        if not kids:
            continue
        pending: list[tuple[list[int], int | None, str]] = [(kids, None, "")]
        while pending:
            span, parent, side = pending.pop()
            if not span:
                continue
            middle = len(span) // 2
            node = span[middle]
            if parent is None:
                child[index] = node
            else:
                (left if side == "l" else right)[parent] = node
            pending.append((span[:middle], node, "l"))
            pending.append((span[middle + 1 :], node, "r"))
    out = b""
    for index, entry in enumerate(entries):
        name = entry.name.encode("utf-16-le")[:62]
        out += struct.pack(
            "<64sHBBIII16sIQQIQ",
            name, len(name) + 2, entry.kind, 1,  # black
            left.get(index, NOSTREAM), right.get(index, NOSTREAM), child.get(index, NOSTREAM),
            b"\0" * 16, 0, 0, 0, entry.start if entry.kind != 1 else 0, entry.size,
        )  # fmt: skip
    return out


def _empty_entry() -> bytes:
    return struct.pack("<64sHBBIII16sIQQIQ", b"", 0, 0, 0, NOSTREAM, NOSTREAM, NOSTREAM,
                       b"\0" * 16, 0, 0, 0, 0, 0)  # fmt: skip


def _fat_layout(data_sectors: int) -> tuple[int, int]:
    """FAT and DIFAT sector counts that cover the data sectors and themselves."""
    fat_count, difat_count = 1, 0
    while True:
        difat_count = max(0, -(-(fat_count - 109) // 127))
        if fat_count * 128 >= data_sectors + fat_count + difat_count:
            return fat_count, difat_count
        fat_count += 1


def _difat_sectors(fat_ids: list[int], first: int) -> bytes:
    out = b""
    for index in range(0, len(fat_ids), 127):
        ids = fat_ids[index : index + 127]
        ids += [FREE] * (127 - len(ids))
        following = first + index // 127 + 1 if index + 127 < len(fat_ids) else END
        out += struct.pack("<128I", *ids, following)
    return out


def _header(
    fat_ids: list[int], fat_count: int, directory: int, minifat: int, minifat_count: int,
    difat: int, difat_count: int,
) -> bytes:  # fmt: skip
    head = struct.pack(
        "<8s16sHHHHH6sIIIIIIIII",
        MAGIC, b"\0" * 16, 0x3E, 3, 0xFFFE, 9, 6, b"\0" * 6, 0, fat_count, directory, 0,
        CUTOFF, minifat, minifat_count, difat, difat_count,
    )  # fmt: skip
    first = fat_ids[:109] + [FREE] * (109 - min(109, len(fat_ids)))
    return head + struct.pack("<109I", *first)


# --- Outlook messages -------------------------------------------------------------------------

PROPERTIES = "__properties_version1.0"


def _prop(tag: int, kind: int) -> str:
    return f"__substg1.0_{tag:04X}{kind:04X}"


def _utf16(text: str) -> bytes:
    return text.encode("utf-16-le")


def message_storage(
    *,
    subject: str,
    body: str | None = None,
    html: str | None = None,
    sender: tuple[str, str] = ("Ada Lovelace", "ada@example.org"),
    to: str = "Charles Babbage",
    cc: str = "",
    message_id: str = "<1@example.org>",
    submitted: int = 133_500_000_000_000_000,  # FILETIME: 2024-01-17
    attachments: list[tuple[str, bytes | Storage]] = (),  # type: ignore[assignment]
    top: bool = True,
) -> Storage:
    """A message's storage: the properties Outlook writes for these fields, with attachments
    (file name, bytes) or attached messages (name, a `message_storage(top=False)`)."""
    storage = Storage()
    header = struct.pack("<8sIIII8s", b"", 0, len(attachments), 0, len(attachments), b"")
    fixed = header if top else header[:24]
    fixed += struct.pack("<HHIQ", 0x0040, 0x0039, 6, submitted)  # PidTagClientSubmitTime
    storage.add(PROPERTIES, fixed)
    storage.add(_prop(0x0037, 0x001F), _utf16(subject))
    storage.add(_prop(0x0C1A, 0x001F), _utf16(sender[0]))
    storage.add(_prop(0x5D01, 0x001F), _utf16(sender[1]))
    storage.add(_prop(0x0E04, 0x001F), _utf16(to))
    if cc:
        storage.add(_prop(0x0E03, 0x001F), _utf16(cc))
    storage.add(_prop(0x1035, 0x001F), _utf16(message_id))
    if body is not None:
        storage.add(_prop(0x1000, 0x001F), _utf16(body))
    if html is not None:
        storage.add(_prop(0x1013, 0x0102), html.encode("utf-8"))
    for number, (name, content) in enumerate(attachments):
        attachment = Storage()
        attachment.add(PROPERTIES, b"\0" * 8)
        attachment.add(_prop(0x3707, 0x001F), _utf16(name))
        if isinstance(content, Storage):
            attachment.add("__substg1.0_3701000D", content)
        else:
            attachment.add(_prop(0x3701, 0x0102), content)
        storage.add(f"__attach_version1.0_#{number:08X}", attachment)
    return storage


def msg(**fields: object) -> bytes:
    """An Outlook `.msg` file (`message_storage`'s fields)."""
    return build(message_storage(**fields))  # type: ignore[arg-type]


def nested_msg(depth: int) -> bytes:
    """A message with a message attached, that one with another, `depth` deep."""
    inner = message_storage(subject=f"Level {depth}", body=f"The innermost of {depth}.", top=False)
    for level in range(depth - 1, 0, -1):
        inner = message_storage(
            subject=f"Level {level}", body=f"Message level {level}.",
            attachments=[(f"level-{level + 1}.msg", inner)], top=False,
        )  # fmt: skip
    return build(
        message_storage(subject="Level 0", body="The outer message.",
                        attachments=[("level-1.msg", inner)])
    )  # fmt: skip


# --- Excel 97 workbooks -----------------------------------------------------------------------


def _record(kind: int, payload: bytes) -> bytes:
    return struct.pack("<HH", kind, len(payload)) + payload


def _bof(kind: int) -> bytes:
    return _record(0x0809, struct.pack("<HHHHII", 0x0600, kind, 0x0DBB, 1996, 0, 0x0600))


def workbook_stream(rows: int, columns: int, *, sheet: str = "Grid") -> bytes:
    """A BIFF8 Workbook stream: one sheet of `rows` x `columns` numbers, a MULRK per row."""
    name = sheet.encode("latin-1")
    boundsheet_size = 4 + 8 + len(name)
    globals_ = _bof(0x0005) + _record(0x0042, struct.pack("<H", 1252))
    for index in range(16):  # 15 style XFs, then the cell XF every cell uses (General)
        style = 0xFFF5 if index < 15 else 0x0001
        globals_ += _record(0x00E0, struct.pack("<HHH14s", 0, 0, style, b"\0" * 14))
    sheet_offset = len(globals_) + boundsheet_size + 4
    globals_ += _record(0x0085, struct.pack("<IBBBB", sheet_offset, 0, 0, len(name), 0) + name)
    globals_ += _record(0x000A, b"")
    assert len(globals_) == sheet_offset
    cells = bytearray(_bof(0x0010))
    cells += _record(0x0200, struct.pack("<IIHHH", 0, rows, 0, columns, 0))
    rk = struct.pack("<HI", 15, (7 << 2) | 2)  # XF 15, the integer 7 as an RK value
    tail = rk * columns + struct.pack("<H", columns - 1)
    for row in range(rows):
        cells += _record(0x00BD, struct.pack("<HH", row, 0) + tail)
    cells += _record(0x000A, b"")
    return globals_ + bytes(cells)


def xls(rows: int, columns: int) -> bytes:
    """A `.xls` workbook holding `rows` x `columns` filled cells."""
    stream = workbook_stream(rows, columns)
    return build(Storage().add("Workbook", stream.ljust(CUTOFF, b"\0")))


# --- damaged compound files --------------------------------------------------------------------


def with_fat_loop(data: bytes, *, self_pointing: bool) -> bytes:
    """`data` with the chain of the first big stream made to loop: its first FAT entry points
    at itself (`self_pointing`), or its last one back to its first."""
    fat_sector = struct.unpack_from("<I", data, 76)[0]
    fat_offset = SECTOR * (fat_sector + 1)
    out = bytearray(data)
    first = 0  # the first data sector holds the first big stream
    if self_pointing:
        struct.pack_into("<I", out, fat_offset, first)
    else:
        index = first
        while (following := struct.unpack_from("<I", out, fat_offset + 4 * index)[0]) != END:
            index = following
        struct.pack_into("<I", out, fat_offset + 4 * index, first)
    return bytes(out)


def with_directory_loop(data: bytes) -> bytes:
    """`data` with the root entry's child (the top of its tree) listed as its own right
    sibling."""
    directory = struct.unpack_from("<I", data, 48)[0]
    offset = SECTOR * (directory + 1)
    child = struct.unpack_from("<I", data, offset + 76)[0]
    out = bytearray(data)
    struct.pack_into("<I", out, offset + 128 * child + 72, child)
    return bytes(out)
