"""Decompress the RTF body of an Outlook message (MS-OXRTFCP, "LZFu").

The format is 16 bytes of header (compressed size, raw size, a "LZFu" or "MELA" signature,
a CRC) and then runs of eight items, each a literal byte or a 2-byte reference into a 4 KiB
dictionary primed with a fixed RTF prologue. Written here rather than taken as a dependency:
the algorithm is thirty lines of a published specification, and the Python packages that
implement it come with an `.msg` stack this project does not use. The output is bounded by
the raw size the header declares, itself bounded by `MAX_RTF_BYTES`.
"""

from __future__ import annotations

import struct

from docingest.pipeline.errors import CorruptDocument, DocumentTooLarge

MAX_RTF_BYTES = 256 * 1024 * 1024
"""Largest decompressed RTF body accepted (an LZFu reference can repeat up to 18 bytes from
2, so a body declares at most 9 times its compressed size; this caps what it may declare)."""

_PROLOGUE = (
    b"{\\rtf1\\ansi\\mac\\deff0\\deftab720{\\fonttbl;}{\\f0\\fnil \\froman \\fswiss \\fmodern "
    b"\\fscript \\fdecor MS Sans SerifSymbolArialTimes New RomanCourier{\\colortbl\\red0\\green0"
    b"\\blue0\r\n\\par \\pard\\plain\\f0\\fs20\\b\\i\\u\\tab\\tx"
)
_COMPRESSED, _UNCOMPRESSED = 0x75465A4C, 0x414C454D  # "LZFu", "MELA"


def decompress_rtf(data: bytes) -> bytes:
    """The RTF text of a `PidTagRtfCompressed` value."""
    if len(data) < 16:
        raise CorruptDocument("The message's RTF body is cut short.")
    _size, raw_size, kind, _crc = struct.unpack_from("<IIII", data)
    if raw_size > MAX_RTF_BYTES:
        raise DocumentTooLarge(f"The message's RTF body declares {raw_size:,} bytes.")
    if kind == _UNCOMPRESSED:
        return data[16 : 16 + raw_size]
    if kind != _COMPRESSED:
        raise CorruptDocument("The message's RTF body has an unknown compression.")
    window = bytearray(4096)
    window[: len(_PROLOGUE)] = _PROLOGUE
    position = len(_PROLOGUE)
    out = bytearray()
    index, end = 16, len(data)
    while index < end and len(out) < raw_size:
        flags = data[index]
        index += 1
        for bit in range(8):
            if index >= end or len(out) >= raw_size:
                break
            if flags & (1 << bit):
                if index + 1 >= end:
                    raise CorruptDocument("The message's RTF body is cut short.")
                reference = (data[index] << 8) | data[index + 1]
                index += 2
                offset, length = reference >> 4, (reference & 0xF) + 2
                if offset == position:  # the end marker
                    return bytes(out)
                for step in range(length):
                    byte = window[(offset + step) % 4096]
                    out.append(byte)
                    window[position] = byte
                    position = (position + 1) % 4096
            else:
                byte = data[index]
                index += 1
                out.append(byte)
                window[position] = byte
                position = (position + 1) % 4096
    return bytes(out)
