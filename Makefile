# `make install` builds .venv with envbuild (editable) and its runtime dependencies only: seconds, not the
# 3 GB of frameworks. `make dev` adds the test tools and the frameworks the smoke tests run; `make test`
# (and unit, lint, bench) run it first, so a fresh clone needs nothing but `make test`.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin

.PHONY: install dev test unit lint bench docs clean

install: $(BIN)/envbuild

$(BIN)/envbuild: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e .
	$(BIN)/python -m compileall -q envbuild  # as pip does for a wheel: start-up time is a feature
	@touch $@

dev: $(VENV)/.dev-installed

# A stamp, not a phony target: `make test` twice does not ask pip again. Bytecode is compiled at install
# (pip's default): --no-compile saves 20 s here but, where PYTHONDONTWRITEBYTECODE=1 is set (as on CI's
# machines), every process then compiles torch, TensorFlow and JAX again on import: 80 s more of tests.
$(VENV)/.dev-installed: $(BIN)/envbuild
	$(BIN)/python -m pip install --quiet -e '.[test,smoke,docs]'
	@touch $@

# The docs site (docs/ and mkdocs.yml; the reference pages and the compatibility explorer are generated
# from the code and the matrix by docsgen/ at build time): MkDocs with the Material theme, into site/.
# --strict: a broken link or a page missing from the nav fails the build.
$(VENV)/.docs-installed: $(BIN)/envbuild
	$(BIN)/python -m pip install --quiet -e '.[docs]'
	@touch $@

docs: $(VENV)/.docs-installed
	NO_MKDOCS_2_WARNING=1 $(BIN)/python -m mkdocs build --strict --site-dir site

# One pytest over every core (pytest-xdist): the engine tests form one xdist group that a single worker
# runs in order (they share the Docker Engine and the Slurm node; tests/helpers/parallel.py), while the
# other workers take tests/unit and tests/integration. PYTEST_WORKERS=0 runs it all in one process.
PYTEST_WORKERS ?= auto
PARALLEL := -n $(PYTEST_WORKERS) --dist loadgroup

test: dev
	$(BIN)/ruff check envbuild tests bench docsgen
	$(BIN)/envbuild matrix check
	$(BIN)/python -m pytest $(PARALLEL) $(PYTEST_ARGS)

unit: dev
	$(BIN)/python -m pytest $(PARALLEL) tests/unit $(PYTEST_ARGS)

lint: dev
	$(BIN)/ruff check envbuild tests bench docsgen

# Every benchmark runs and prints its figures even when an earlier one misses its target; the target
# fails at the end if any missed.
BENCHES ?= resolve lock build layers refresh audit attest conda runtimes preflight engines vendor

bench: dev
	@missed=""; for b in $(BENCHES); do $(BIN)/python bench/$$b.py || missed="$$missed $$b"; done; \
	if [ -n "$$missed" ]; then echo "benchmarks that missed a target:$$missed"; exit 1; fi

clean:
	rm -rf $(VENV) build dist site .pytest_cache .ruff_cache
