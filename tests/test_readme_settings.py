"""The README's settings table mirrors `Settings`: a row for every field, and the defaults shown
are the defaults in code.

A row may name several variables: `DOCINGEST_HEARTBEAT_INTERVAL_SECONDS` / `_TIMEOUT_SECONDS`
(the short form keeps a leading part of the first name) with `5 / 60`, one default each, or one
default for all (`0 (off)`). A default in backticks or a number is a literal; a description
(`unset`, `—`, `server defaults`, `model's own`) stands for no value in code (None).
"""

from __future__ import annotations

import json
import re
from enum import Enum
from pathlib import Path
from typing import Any

import pytest
from pydantic import SecretStr

from docingest.pipeline.settings import Settings
from tests.support.paths import REPO_DIR

README = REPO_DIR / "README.md"
PREFIX = "DOCINGEST_"
UNITS = {"KiB": 1024, "MiB": 1024**2, "GiB": 1024**3}
_NUMBER = re.compile(r"^(-?\d+(?:\.\d+)?)(?:\s*(KiB|MiB|GiB))?$")


def settings_table(text: str) -> list[tuple[str, str, str]]:
    """The (variables, default, meaning) cells of the table under `## Configuration`."""
    section = text.split("\n## Configuration\n", 1)[1].split("\n## ", 1)[0]
    rows = []
    for line in section.splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if line.startswith("|") and len(cells) == 3 and cells[0].startswith("`"):
            rows.append((cells[0], cells[1], cells[2]))
    return rows


def field_of(variable: str) -> str:
    return variable.removeprefix(PREFIX).lower()


def expand(cell: str, fields: set[str]) -> list[str]:
    """The setting fields a variables cell names, short forms resolved against `fields`."""
    names = re.findall(r"`([A-Z_][A-Z0-9_]*)`", cell)
    first = names[0]
    assert first.startswith(PREFIX), f"a row starts with its full variable name: {cell}"
    found = []
    for name in names:
        if name.startswith(PREFIX):
            found.append(field_of(name))
        elif name.startswith("_"):
            words = field_of(first).split("_")
            candidates = ["_".join(words[:k]) + name.lower() for k in range(len(words), 0, -1)]
            known = [candidate for candidate in candidates if candidate in fields]
            assert known, f"{name} in {cell!r} shortens no setting of {first}"
            found.append(known[0])
        # other names (OPENAI_API_KEY, the client's fallback) are not docingest settings
    return found


def literal(shown: str) -> Any:
    """What a default cell part means: a literal, or None for a description."""
    shown = re.sub(r"\s*\([^)]*\)$", "", shown.strip())
    if shown.startswith("`") and shown.endswith("`"):
        inner = shown[1:-1]
        try:
            value = json.loads(inner)
        except json.JSONDecodeError:
            return inner
        return float(value) if type(value) in (int, float) else value
    number = _NUMBER.match(shown)
    if number:
        return float(number[1]) * UNITS.get(number[2] or "", 1)
    return None


def in_code(name: str) -> Any:
    """The default of a field as the README would show it."""
    value = Settings.model_fields[name].get_default(call_default_factory=True)
    if isinstance(value, SecretStr):
        return value.get_secret_value()
    if isinstance(value, Enum):
        return value.value
    if isinstance(value, bool) or value is None or isinstance(value, list):
        return value
    if isinstance(value, int | float):
        return float(value)
    return value


def same_default(shown: Any, name: str) -> bool:
    expected = in_code(name)
    if isinstance(expected, Path):
        return isinstance(shown, str) and Path(shown).expanduser() == expected
    return bool(shown == expected and type(shown) is type(expected))


def rows() -> list[tuple[list[str], list[Any], str]]:
    fields = set(Settings.model_fields)
    parsed = []
    for variables, default, meaning in settings_table(README.read_text()):
        names = expand(variables, fields)
        parts = [literal(part) for part in default.split(" / ")]
        assert len(parts) in (1, len(names)), f"{len(parts)} defaults for {names}: {default}"
        parsed.append((names, parts * len(names) if len(parts) == 1 else parts, meaning))
    return parsed


def test_the_table_is_found_and_parsed() -> None:
    parsed = rows()
    assert len(parsed) > 30
    by_name = {
        name: shown
        for names, defaults, _ in parsed
        for name, shown in zip(names, defaults, strict=True)
    }
    assert by_name["heartbeat_timeout_seconds"] == 60.0
    assert by_name["extraction_memory_bytes"] == 3 * 1024**3
    assert by_name["qdrant_shard_number"] is None
    assert by_name["embedding_max_batch_tokens"] == 300_000.0
    assert by_name["api_keys"] == []


def test_every_setting_has_a_row_and_every_row_a_setting() -> None:
    named = [name for names, _, _ in rows() for name in names]
    assert len(named) == len(set(named)), "a setting has two rows"
    missing = set(Settings.model_fields) - set(named)
    assert not missing, f"README's settings table lacks {sorted(missing)}"
    unknown = set(named) - set(Settings.model_fields)
    assert not unknown, f"README's settings table names no setting: {sorted(unknown)}"


@pytest.mark.parametrize(
    ("shown", "field"),
    [
        ("3 GiB", "extraction_memory_bytes"),
        ("`true`", "isolate_extraction"),
        ("`chars`", "chunk_unit"),
        ("unset (local mode)", "qdrant_url"),
        ("`~/.local/share/docingest`", "data_dir"),
        ("0 (off)", "embedding_requests_per_minute"),
    ],
)
def test_the_comparison_accepts_the_shapes_of_the_table(shown: str, field: str) -> None:
    assert same_default(literal(shown), field)


@pytest.mark.parametrize(
    ("shown", "field"),
    [
        ("300", "extraction_cpu_seconds"),  # the drift this test was written for
        ("2 GiB", "extraction_memory_bytes"),
        ("`false`", "isolate_extraction"),
        ("`tokens`", "chunk_unit"),
        ("unset", "redis_url"),
        ("`/tmp/docingest`", "data_dir"),
        ("`8001`", "port"),
        ("`[{}]`", "api_keys"),
    ],
)
def test_the_comparison_refuses_a_wrong_default(shown: str, field: str) -> None:
    assert not same_default(literal(shown), field)


def test_the_defaults_shown_are_the_defaults_in_code() -> None:
    wrong = [
        f"{name}: README shows {shown!r}, Settings has {in_code(name)!r}"
        for names, defaults, _ in rows()
        for name, shown in zip(names, defaults, strict=True)
        if not same_default(shown, name)
    ]
    assert not wrong, "\n".join(wrong)


def test_every_row_says_what_the_setting_means() -> None:
    for names, _, meaning in rows():
        assert len(meaning) > 5, names
