# Everyday commands; CI (.ci/run) calls the same targets.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp
# Two test processes, each keeping a file's tests together (module-scoped services): most
# service tests wait on subprocesses and polling, so this halves the wall time on 2 CPUs.
PYTEST_ARGS ?= -n 2 --dist loadfile

.PHONY: install lint test bench run audit clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev,bench]'
	touch $(STAMP)

install: $(STAMP)

lint: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy
	$(BIN)/lint-imports

test: install
	VENV=$(VENV) .ci/system-deps
	$(BIN)/pytest $(PYTEST_ARGS)

bench: install
	$(BIN)/python bench/bench_chunking.py
	$(BIN)/python bench/bench_extraction.py
	$(BIN)/python bench/bench_pdf_engines.py --skip-pypdf-on-big
	$(BIN)/python bench/bench_service.py --quick

run: install
	$(BIN)/docingest serve --seed examples

# Full advisory database check (needs network to PyPI's JSON API or OSV; CI here has none, so
# tests/test_supply_chain.py holds the advisories that matter offline).
audit: install
	$(BIN)/python -m pip install --quiet pip-audit
	$(BIN)/pip-audit --skip-editable

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache .mypy_cache .hypothesis .import_linter_cache
