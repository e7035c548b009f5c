# The quick start: `make demo` runs amc on an embedded default; `make test` runs every test;
# `make lint` checks style and types.
# Each creates the virtualenv in .venv on first use, with nothing but Python installed.

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: test lint demo bench check clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e ".[test]"
	touch $(STAMP)

test: $(STAMP)
	$(BIN)/python -m pytest $(PYTEST_ARGS)

# Lint, formatting and types; the tools and their settings are in pyproject.toml.
lint: $(STAMP)
	$(BIN)/ruff check
	$(BIN)/ruff format --check
	$(BIN)/mypy

demo: $(STAMP)
	$(BIN)/amc demo

check: $(STAMP)
	$(BIN)/amc model check

bench: $(STAMP)
	$(BIN)/python bench/kernel.py

clean:
	rm -rf $(VENV) .pytest_cache .hypothesis
