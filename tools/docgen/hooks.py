"""mkdocs hook: add the generated reference pages to the site at build time.

`reference/configuration.md` comes from `Settings` and `reference/cli.md` from the command
line's parser (`tools.docgen`), so neither is committed and neither can fall behind the code.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO_DIR = Path(__file__).resolve().parents[2]
if str(REPO_DIR) not in sys.path:  # mkdocs loads this file by path, outside any package
    sys.path.insert(0, str(REPO_DIR))

from mkdocs.structure.files import File, Files  # noqa: E402

from tools.docgen import cli_reference, settings_reference  # noqa: E402

GENERATED: dict[str, Callable[[], str]] = {
    "reference/configuration.md": settings_reference.render_markdown,
    "reference/cli.md": cli_reference.render_markdown,
}


def on_files(files: Files, config: Any) -> Files:
    for uri, render in GENERATED.items():
        files.append(File.generated(config, uri, content=render()))
    return files
