"""The configuration reference and `.env.example`, both rendered from `Settings`.

A setting's variable is `DOCINGEST_` + its field name in capitals; its type and default come
from the field; its meaning is the field's docstring (the attribute docstring under it, which
pydantic does not keep, so it is read from the source with `ast`). Settings' own fields are
grouped by the `# --- name ---` comments of its class body; each base class it inherits
(`RerankSettings`, ...) is a group of its own, titled in `BASE_TITLES`.

`python -m tools.docgen.settings_reference` rewrites `.env.example` (`make env-example`);
`--check` exits 1 when the committed file differs from what this module renders.
"""

from __future__ import annotations

import argparse
import ast
import inspect
import json
import re
import sys
import textwrap
import types
import typing
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import Any, Literal, get_args, get_origin

from pydantic import BaseModel, SecretStr
from pydantic.fields import FieldInfo

from docingest.pipeline.settings import Settings

REPO_DIR = Path(__file__).resolve().parents[2]
ENV_EXAMPLE = REPO_DIR / ".env.example"
COMPOSE_FILE = REPO_DIR / "docker-compose.yml"
PREFIX = "DOCINGEST_"
WIDTH = 95

BASE_TITLES = {
    "DatabaseSettings": "PostgreSQL store",
    "OcrSettings": "OCR",
    "SearchSettings": "hybrid search (may change at any time)",
    "RerankSettings": "rerank (the second stage of a search; may change at any time)",
    "WebhookSettings": "webhooks",
    "SourceSettings": "sources (buckets, websites and server folders kept in sync)",
}
"""The group title of each base class of `Settings`; a base missing here fails the render."""

_SECTION = re.compile(r"^\s*# --- (?P<title>.+?) -+\s*$")
_HOME = str(Path.home())

ENV_HEADER = """\
# docingest settings for docker compose: `cp .env.example .env`, then uncomment what you change.
# Generated from `Settings` (docingest/pipeline/settings/) by `make env-example`: edit the field's
# docstring there, not this file. Every DOCINGEST_* setting is listed with its default, or with
# the value docker-compose.yml gives it. The same text is the docs' configuration reference.
# docker-compose.yml reads this file twice: for ${...} substitution in the compose file, and
# as the environment of the api and worker containers. Keep .env out of git: it holds secrets.

# --- docker compose only (not docingest settings) ------------------------------------------
# Host address and port the API is published on; 127.0.0.1 keeps it off the network.
# API_BIND=127.0.0.1
# API_PORT=8000
# Redis memory cap; with maxmemory-policy noeviction a full Redis refuses writes instead of
# silently dropping queued tasks or job state.
# REDIS_MAXMEMORY=1gb
"""
"""The compose-only part of `.env.example`, written by hand: compose reads these, docingest
does not."""

COMPOSE_NOTES = {
    "DOCINGEST_DATA_DIR": "Uploads are staged in /data/staging, a volume shared by the API and "
    "every worker (on several hosts: NFS, EFS or similar, see deploy/README.md).",
    "DOCINGEST_QDRANT_URL": "Compose always runs the qdrant service: the embedded store has one "
    "owning process.",
    "DOCINGEST_QDRANT_API_KEY": "A secret: set it here, never in an image.",
    "DOCINGEST_PORT": "Inside the container; publish another port with API_PORT.",
    "DOCINGEST_API_KEYS": "Prefer the sha256 form, so the clear key is not stored here.",
}
"""What a compose deployment should know about a setting beyond its docstring."""


@dataclass(frozen=True)
class SettingDoc:
    """One setting as the references show it."""

    name: str
    group: str
    doc: str
    field: FieldInfo

    @property
    def variable(self) -> str:
        return PREFIX + self.name.upper()

    @property
    def default(self) -> Any:
        return self.field.get_default(call_default_factory=True)


def _attribute_docstrings(cls: type) -> dict[str, tuple[int, str]]:
    """Each annotated attribute of `cls`'s own body: (line in the class source, docstring)."""
    tree = ast.parse(textwrap.dedent(inspect.getsource(cls)))
    body = tree.body[0]
    assert isinstance(body, ast.ClassDef)
    found: dict[str, tuple[int, str]] = {}
    for node, after in zip(body.body, [*body.body[1:], None], strict=True):
        if not (isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name)):
            continue
        doc = ""
        if (
            isinstance(after, ast.Expr)
            and isinstance(after.value, ast.Constant)
            and isinstance(after.value.value, str)
        ):
            doc = inspect.cleandoc(after.value.value)
        found[node.target.id] = (node.lineno, doc)
    return found


def _sections(cls: type) -> list[tuple[int, str]]:
    """The `# --- title ---` comments of `cls`'s source: (line, title), in order."""
    lines = textwrap.dedent(inspect.getsource(cls)).splitlines()
    return [
        (number, match["title"])
        for number, line in enumerate(lines, start=1)
        if (match := _SECTION.match(line))
    ]


def settings_docs(settings: type[BaseModel] = Settings) -> list[SettingDoc]:
    """Every field of `settings`, grouped: each class's `# --- title ---` sections in source
    order (a base without them is one group, titled in `BASE_TITLES`), the class before its
    bases."""
    docs: list[SettingDoc] = []
    seen: set[str] = set()
    classes = [settings] + [
        base
        for base in settings.__mro__[1:]
        if issubclass(base, BaseModel) and base.__module__.startswith("docingest.")
    ]
    for cls in classes:
        sections = _sections(cls)
        for name, (line, doc) in _attribute_docstrings(cls).items():
            if name in seen or name not in settings.model_fields:
                continue
            titles = [title for start, title in sections if start < line]
            group = titles[-1] if titles else BASE_TITLES[cls.__name__]
            seen.add(name)
            docs.append(SettingDoc(name, group, doc, settings.model_fields[name]))
    missing = set(settings.model_fields) - seen
    assert not missing, f"fields whose source was not found: {sorted(missing)}"
    return docs


def grouped(docs: list[SettingDoc]) -> dict[str, list[SettingDoc]]:
    groups: dict[str, list[SettingDoc]] = {}
    for doc in docs:
        groups.setdefault(doc.group, []).append(doc)
    return groups


# --- types and defaults as people read them ------------------------------------------------


def type_name(annotation: Any) -> str:
    """A field's type in words: `integer`, `path, optional`, `one of auto, off, force`, ..."""
    origin = get_origin(annotation)
    args = get_args(annotation)
    if origin is typing.Annotated:
        return type_name(args[0])
    if origin in (types.UnionType, typing.Union):
        rest = [arg for arg in args if arg is not type(None)]
        inner = " or ".join(type_name(arg) for arg in rest)
        return f"{inner}, optional" if len(rest) < len(args) else inner
    if origin is Literal:
        return "one of " + ", ".join(f"`{arg}`" for arg in args)
    if origin is list:
        return f"list of {type_name(args[0])}"
    if origin is dict:
        return f"object of {type_name(args[0])} to {type_name(args[1])}"
    if isinstance(annotation, type) and issubclass(annotation, Enum):
        return "one of " + ", ".join(f"`{member.value}`" for member in annotation)
    names = {
        bool: "boolean",
        int: "integer",
        float: "number",
        str: "string",
        Path: "path",
        SecretStr: "secret",
    }
    if annotation in names:
        return names[annotation]
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return f"`{annotation.__name__}` object"
    return str(annotation)


def env_value(value: Any) -> str:
    """A value as an environment variable spells it (empty for None)."""
    if value is None:
        return ""
    if isinstance(value, SecretStr):
        return value.get_secret_value()
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, list | dict):
        return json.dumps(value)
    if isinstance(value, Enum):
        return str(value.value)
    if isinstance(value, Path) and str(value).startswith(_HOME + "/"):
        return "~" + str(value)[len(_HOME) :]  # the same text on every machine
    return str(value)


def shown_default(value: Any) -> str:
    """A default as the reference page shows it: `unset` for None, else the value in code."""
    return "unset" if value is None else f"`{env_value(value)}`"


def _cell(text: str) -> str:
    """Text for one Markdown table cell: one line, pipes escaped."""
    return " ".join(text.split()).replace("|", "\\|")


# --- the two renderings ---------------------------------------------------------------------


def render_markdown(docs: list[SettingDoc] | None = None) -> str:
    """The configuration reference page."""
    docs = settings_docs() if docs is None else docs
    out = [
        "# Configuration",
        "",
        "docingest reads one settings object, `docingest.pipeline.settings.Settings`, from",
        "`DOCINGEST_*` environment variables: the variable is `DOCINGEST_` and the field's name",
        "in capitals (`chunk_size` is `DOCINGEST_CHUNK_SIZE`). Lists, objects and API keys are",
        "JSON; `DOCINGEST_OPENAI_FALLBACK_URLS` and `_API_KEYS` also take a comma-separated list.",
        "This page is generated from the class, as is `.env.example`, so neither can drift.",
        "",
        "The command line reads two more: `DOCINGEST_URL` (the service to talk to, by default",
        "`http://DOCINGEST_HOST:DOCINGEST_PORT`) and `DOCINGEST_API_KEY` (sent as a Bearer token).",
        "The `openai` provider also reads `OPENAI_API_KEY` and `OPENAI_BASE_URL` when the",
        "`DOCINGEST_OPENAI_*` settings are unset.",
        "",
    ]
    for group, members in grouped(docs).items():
        out += [f"## {group[0].upper()}{group[1:]}", ""]
        out += ["| variable | type | default | meaning |", "| --- | --- | --- | --- |"]
        for doc in members:
            cells = [
                f"`{doc.variable}`",
                _cell(type_name(doc.field.annotation)),
                _cell(shown_default(doc.default)),
                _cell(doc.doc),
            ]
            out.append("| " + " | ".join(cells) + " |")
        out.append("")
    return "\n".join(out)


def compose_values(compose_file: Path = COMPOSE_FILE) -> dict[str, str]:
    """The value docker-compose.yml gives each DOCINGEST_* variable when .env leaves it unset:
    a literal, or the default of its `${NAME:-default}`."""
    import yaml  # a service dependency; only this rendering needs it

    compose = yaml.safe_load(compose_file.read_text(encoding="utf-8"))
    values: dict[str, str] = {}
    for service in compose["services"].values():
        for name, value in (service.get("environment") or {}).items():
            if not name.startswith(PREFIX):
                continue
            text = str(value)
            substituted = re.fullmatch(r"\$\{[A-Z0-9_]+(?::-(?P<default>[^}]*))?\}", text)
            values[name] = (substituted["default"] or "") if substituted else text
    return values


def render_env_example(
    docs: list[SettingDoc] | None = None, *, compose: dict[str, str] | None = None
) -> str:
    """`.env.example`: the compose-only header, then every setting as `# NAME=value` under its
    docstring, the value being the one compose gives it where compose sets one."""
    docs = settings_docs() if docs is None else docs
    compose = compose_values() if compose is None else compose
    out = [ENV_HEADER]
    for group, members in grouped(docs).items():
        out.append(f"# --- {group} ".ljust(WIDTH, "-"))
        for doc in members:
            text = doc.doc or "(undocumented)"
            default = env_value(doc.default)
            value = compose.get(doc.variable, default)
            if value != default:
                text += f" Default `{default or 'unset'}`; docker-compose.yml sets `{value}`."
            if doc.variable in COMPOSE_NOTES:
                text += " " + COMPOSE_NOTES[doc.variable]
            for paragraph in text.split("\n\n"):
                out += textwrap.wrap(
                    " ".join(paragraph.split()),
                    WIDTH,
                    initial_indent="# ",
                    subsequent_indent="# ",
                    break_on_hyphens=False,
                )
            out.append(f"# {doc.variable}={value}")
        out.append("")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Write .env.example from Settings.")
    parser.add_argument("--check", action="store_true", help="exit 1 if the file differs")
    args = parser.parse_args(argv)
    rendered = render_env_example()
    if args.check:
        if ENV_EXAMPLE.read_text(encoding="utf-8") != rendered:
            sys.stderr.write(".env.example is not what Settings renders: run make env-example\n")
            return 1
        return 0
    ENV_EXAMPLE.write_text(rendered, encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
