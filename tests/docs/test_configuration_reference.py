"""The configuration reference and `.env.example`, both rendered from `Settings`: every field
has a documented row, each default shown reads back as the default in code, and the committed
`.env.example` is what the renderer writes (replacing the test of the README's hand-kept
settings table, which the generated page replaced)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from pydantic import SecretStr

from docingest.pipeline.settings import Settings
from tools.docgen import settings_reference as reference
from tools.docgen.settings_reference import SettingDoc, render_env_example, render_markdown

_ROW = re.compile(r"^\| `(DOCINGEST_[A-Z0-9_]+)` \| (.*?) \| (.*?) \| (.*) \|$", re.MULTILINE)
_ENV_LINE = re.compile(r"^# (DOCINGEST_[A-Z0-9_]+)=(.*)$", re.MULTILINE)


def rows(page: str) -> dict[str, tuple[str, str, str]]:
    """variable → (type, default, meaning) of the page's tables; a repeated row fails."""
    found: dict[str, tuple[str, str, str]] = {}
    for variable, kind, default, meaning in _ROW.findall(page):
        assert variable not in found, f"{variable} has two rows"
        found[variable] = (kind, default, meaning)
    return found


def undocumented(docs: list[SettingDoc]) -> list[str]:
    """Fields whose docstring says nothing (STYLE.md: every field has a docstring)."""
    return [doc.name for doc in docs if len(doc.doc) < 10]


def comparable(value: object) -> object:
    if isinstance(value, SecretStr):
        return value.get_secret_value()
    if isinstance(value, Path):
        return value.expanduser()
    if isinstance(value, list):
        return [comparable(item) for item in value]
    return value


def test_every_setting_has_one_row_with_its_meaning() -> None:
    shown = rows(render_markdown())
    variables = {"DOCINGEST_" + name.upper() for name in Settings.model_fields}
    assert set(shown) == variables
    assert len(shown) > 80
    assert not undocumented(reference.settings_docs())
    for variable, (_, _, meaning) in shown.items():
        assert len(meaning) > 10, variable


def test_a_new_field_gets_a_row_and_a_missing_docstring_is_caught() -> None:
    class Extended(Settings):
        # --- experiments ---------------------------------------------------------------
        new_knob: int = 7
        documented_knob: bool = False
        """A knob with a meaning, to show that a docstring is read."""

    docs = reference.settings_docs(Extended)
    assert undocumented(docs) == ["new_knob"]
    shown = rows(render_markdown(docs))
    assert shown["DOCINGEST_NEW_KNOB"][:2] == ("integer", "`7`")
    assert shown["DOCINGEST_DOCUMENTED_KNOB"][2].startswith("A knob with a meaning")
    assert set(shown) == {"DOCINGEST_" + name.upper() for name in Extended.model_fields}
    assert "## Experiments" in render_markdown(docs)


def test_every_default_shown_reads_back_as_the_default_in_code(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Setting a variable to the default the page shows gives the field its default value."""
    for variable, (_, default, _) in rows(render_markdown()).items():
        field = variable.removeprefix("DOCINGEST_").lower()
        expected = Settings.model_fields[field].get_default(call_default_factory=True)
        if default == "unset":
            assert expected is None, variable
            continue
        assert default.startswith("`") and default.endswith("`"), (variable, default)
        with monkeypatch.context() as env:
            env.setenv(variable, default[1:-1])
            assert comparable(getattr(Settings(), field)) == comparable(expected), variable


def test_types_and_groups_are_read_from_the_code() -> None:
    shown = rows(render_markdown())
    assert shown["DOCINGEST_EXTRACTION_CPU_SECONDS"][:2] == ("integer", "`900`")
    assert shown["DOCINGEST_OCR"][0] == "one of `auto`, `off`, `force`"
    assert shown["DOCINGEST_CHUNK_UNIT"][:2] == ("one of `chars`, `tokens`", "`chars`")
    assert shown["DOCINGEST_QDRANT_API_KEY"][:2] == ("secret, optional", "unset")
    assert shown["DOCINGEST_DATA_DIR"][1] == "`~/.local/share/docingest`"
    groups = {doc.name: doc.group for doc in reference.settings_docs()}
    assert groups["chunk_size"] == "chunking defaults (per index overridable)"
    assert groups["rerank_url"] == reference.BASE_TITLES["RerankSettings"]
    assert groups["webhook_timeout_seconds"] == "webhooks"


def test_the_committed_env_example_is_what_settings_render() -> None:
    committed = reference.ENV_EXAMPLE.read_text(encoding="utf-8")
    assert committed == render_env_example(), "run `make env-example` and commit .env.example"


def test_env_example_keeps_its_compose_part_first_and_every_setting_once() -> None:
    text = render_env_example()
    assert text.index("# API_PORT=8000") < text.index("# DOCINGEST_")
    named = [name for name, _ in _ENV_LINE.findall(text)]
    assert sorted(named) == sorted("DOCINGEST_" + name.upper() for name in Settings.model_fields)


def test_env_example_shows_what_compose_sets() -> None:
    compose = reference.compose_values()
    assert compose["DOCINGEST_DATA_DIR"] == "/data"
    assert compose["DOCINGEST_REDIS_URL"] == "redis://redis:6379/0"  # ${NAME:-default}'s default
    text = render_env_example(compose={"DOCINGEST_PORT": "9000"})
    assert "\n# DOCINGEST_PORT=9000\n" in text
    assert "docker-compose.yml sets `9000`" in text.replace("\n# ", " ")
    assert "\n# DOCINGEST_DATA_DIR=~/.local/share/docingest\n" in text  # no compose: default
