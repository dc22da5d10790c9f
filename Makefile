# `make install` builds .venv with envbuild (editable) and its test tools; `make test` runs everything.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin

.PHONY: install test unit lint bench clean

install: $(BIN)/envbuild

$(BIN)/envbuild: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[test,smoke]'
	$(BIN)/python -m compileall -q envbuild  # as pip does for a wheel: start-up time is a feature
	@touch $@

test: install
	$(BIN)/ruff check envbuild tests bench
	$(BIN)/envbuild matrix check
	$(BIN)/python -m pytest $(PYTEST_ARGS)

unit: install
	$(BIN)/python -m pytest tests/unit $(PYTEST_ARGS)

lint: install
	$(BIN)/ruff check envbuild tests bench

bench: install
	$(BIN)/python bench/resolve.py
	$(BIN)/python bench/lock.py
	$(BIN)/python bench/build.py
	$(BIN)/python bench/refresh.py
	$(BIN)/python bench/audit.py

clean:
	rm -rf $(VENV) build dist .pytest_cache .ruff_cache
