"""Renderers of the docs' generated references: each table has one source in the code.

- `settings_reference`: the configuration reference and `.env.example`, from `Settings`.
- `cli_reference`: the command-line reference, from `docingest.cli.build_parser`.
- `hooks`: the mkdocs hook that puts both into the site at build time (nothing generated is
  committed but `.env.example`, which docker compose reads from the repository).

They live here, outside the `docingest` package, because they are build tools: the wheel does
not ship them, and the import-linter contracts that keep the package's layers stay about the
product. Here the mkdocs hook (which puts the repository root on `sys.path`), the tests
(`tests/docs/`, run from the root) and `make env-example` (`python -m tools.docgen...`) import
the same functions, so what the site shows and what the tests check cannot differ.
"""
