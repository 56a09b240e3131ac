"""Legacy Word, PowerPoint, Excel and RTF files, and OpenDocument spreadsheets and decks, read
as their modern twins: the corpus's DOCX, PPTX and XLSX files saved in the old formats by
LibreOffice at test time give the same words, headings, tables and pages."""

from __future__ import annotations

import re
import struct
from collections import Counter
from pathlib import Path

import pytest

from docingest.pipeline.detect import detect
from docingest.pipeline.document import BlockKind, ExtractedDocument
from docingest.pipeline.errors import CorruptDocument, EncryptedDocument, ExtractionTimeout
from docingest.pipeline.extract import extract
from docingest.pipeline.extract.office import instance
from docingest.pipeline.extract.office.instance import Office
from docingest.pipeline.settings import Settings
from tests.support import legacy_files, ole2_files

SETTINGS = Settings(isolate_extraction=False)
_WORD = re.compile(r"\w+")


@pytest.fixture(scope="module")
def twins(tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[tuple[Path, Path]]]:
    return legacy_files.make_twins(tmp_path_factory.mktemp("legacy"))


def _read(path: Path) -> ExtractedDocument:
    data = path.read_bytes()
    return extract(data, detect(data, filename=path.name), settings=SETTINGS)


def _overlap(first: ExtractedDocument, second: ExtractedDocument) -> float:
    """Shared words (with their counts) over the larger document's words."""
    a, b = (
        Counter(_WORD.findall(" ".join(x.text for x in d.blocks).lower())) for d in (first, second)
    )
    return sum((a & b).values()) / max(sum(a.values()), sum(b.values()))


def _headings(document: ExtractedDocument) -> list[tuple[int, str, int | None]]:
    return [(b.level, b.text, b.page) for b in document.blocks if b.kind is BlockKind.HEADING]


@pytest.mark.parametrize("kind", ["doc", "rtf"])
def test_word_and_rtf_files_give_the_words_and_headings_of_their_docx(
    twins: dict[str, list[tuple[Path, Path]]], kind: str
) -> None:
    for legacy, modern in twins[kind]:
        old, new = _read(legacy), _read(modern)
        assert old.format == kind
        assert _overlap(old, new) >= 0.98, legacy.name
        assert _headings(old) == _headings(new), legacy.name
        # Tables survive (a .doc may merge adjacent ones: Word 97 has no gap between them).
        tables = [b for b in new.blocks if b.kind is BlockKind.TABLE]
        assert bool([b for b in old.blocks if b.kind is BlockKind.TABLE]) == bool(tables)


def test_a_doc_keeps_its_title_author_and_dates(twins: dict[str, list[tuple[Path, Path]]]) -> None:
    legacy, modern = twins["doc"][0]
    old, new = _read(legacy), _read(modern)
    assert old.title == new.title == "Sample Word Document"
    assert old.author and old.created == new.created


@pytest.mark.parametrize("kind", ["ppt", "odp"])
def test_decks_give_the_slides_titles_and_words_of_their_pptx(
    twins: dict[str, list[tuple[Path, Path]]], kind: str
) -> None:
    for legacy, modern in twins[kind]:
        old, new = _read(legacy), _read(modern)
        assert old.format == kind
        assert old.pages == new.pages and old.pages
        assert _headings(old) == _headings(new), legacy.name
        assert _overlap(old, new) >= 0.98, legacy.name
        assert all(block.page for block in old.blocks)


@pytest.mark.parametrize("kind", ["xls", "ods"])
def test_workbooks_give_the_sheets_and_rows_of_their_xlsx(
    twins: dict[str, list[tuple[Path, Path]]], kind: str
) -> None:
    for legacy, modern in twins[kind]:
        old, new = _read(legacy), _read(modern)
        assert old.format == kind
        assert [(b.kind, b.text) for b in old.blocks] == [(b.kind, b.text) for b in new.blocks]
        assert old.extra["rows"] == new.extra["rows"] and old.extra["sheets"] == new.extra["sheets"]
        assert old.author == new.author


def test_a_word_file_flagged_encrypted_is_refused_before_libreoffice(
    twins: dict[str, list[tuple[Path, Path]]],
) -> None:
    data = bytearray(twins["doc"][0][0].read_bytes())
    position = data.find(b"\xec\xa5")  # the FIB's wIdent, at the WordDocument stream's start
    struct.pack_into(
        "<H", data, position + 0x0A, struct.unpack_from("<H", data, position + 0x0A)[0] | 0x0100
    )
    with pytest.raises(EncryptedDocument, match="Word document is password-protected"):
        extract(bytes(data), detect(bytes(data)), settings=SETTINGS)


def test_a_workbook_with_a_filepass_record_is_encrypted() -> None:
    stream = ole2_files.workbook_stream(3, 3)
    bof_end = 4 + struct.unpack_from("<H", stream, 2)[0]
    filepass = struct.pack("<HHH", 0x002F, 2, 1)
    data = ole2_files.build(
        ole2_files.Storage().add(
            "Workbook", (stream[:bof_end] + filepass + stream[bof_end:]).ljust(4096, b"\0")
        )
    )
    with pytest.raises(EncryptedDocument, match="Excel workbook is password-protected"):
        extract(data, detect(data), settings=SETTINGS)


def test_one_warm_instance_converts_file_after_file(
    twins: dict[str, list[tuple[Path, Path]]],
) -> None:
    first, second = twins["doc"][0][0], twins["ppt"][0][0]
    _read(first)
    warm = instance.warm_instance(SETTINGS.extraction_memory_bytes)
    pid = warm.pid
    assert pid is not None and warm.alive()
    _read(second)
    assert warm.pid == pid and warm.alive()


def test_a_conversion_past_its_cpu_budget_kills_the_instance_group(
    twins: dict[str, list[tuple[Path, Path]]], tmp_path: Path
) -> None:
    office = Office(SETTINGS.extraction_memory_bytes, profile=tmp_path / "profile")
    try:
        data = twins["doc"][2][0].read_bytes()
        with pytest.raises(ExtractionTimeout, match="CPU seconds"):
            office.convert(data, suffix=".doc", export_filter="MS Word 2007 XML",
                           target=".docx", cpu_seconds=0.0)  # fmt: skip
        assert office.pid is None
        processes = Path("/proc").glob("[0-9]*/cmdline")
        assert not any(str(tmp_path / "profile") in _cmdline(path) for path in processes)
    finally:
        office.stop()


def test_a_file_a_warm_instance_fails_is_tried_once_more_on_a_fresh_one(
    twins: dict[str, list[tuple[Path, Path]]], tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The instance may be what failed, so a warm one that fails a file is replaced and the
    file tried again; a file that is damaged fails there too, with the same code, and
    LibreOffice's own complaint is logged. A cold instance's failure is final."""
    office = Office(SETTINGS.extraction_memory_bytes, profile=tmp_path / "profile")
    good = twins["doc"][0][0].read_bytes()
    damaged = good[:512] + b"\0" * (len(good) - 512)  # the OLE2 header of a .doc, then nothing
    convert = {"suffix": ".doc", "export_filter": "MS Word 2007 XML", "target": ".docx"}
    try:
        office.convert(good, cpu_seconds=120.0, **convert)
        warm_pid = office.pid
        with caplog.at_level("WARNING"), pytest.raises(CorruptDocument):
            office.convert(damaged, cpu_seconds=120.0, **convert)
        assert "trying it once more on a fresh instance" in caplog.text
        assert office.pid is not None and office.pid != warm_pid  # the fresh one stays
        assert office.convert(good, cpu_seconds=120.0, **convert)[:2] == b"PK"
    finally:
        office.stop()
    cold = Office(SETTINGS.extraction_memory_bytes, profile=tmp_path / "cold")
    caplog.clear()
    try:
        with caplog.at_level("WARNING"), pytest.raises(CorruptDocument):
            cold.convert(damaged, cpu_seconds=120.0, **convert)
        assert "once more" not in caplog.text
    finally:
        cold.stop()


def _cmdline(path: Path) -> str:
    try:
        return path.read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""
