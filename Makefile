# The quick start: `make demo` runs amc on an embedded default; `make test` runs every test.
# Both create the virtualenv in .venv on first use, with nothing but Python installed.

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: test demo bench check clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e ".[test]"
	touch $(STAMP)

test: $(STAMP)
	$(BIN)/python -m pytest $(PYTEST_ARGS)

demo: $(STAMP)
	$(BIN)/amc demo

check: $(STAMP)
	$(BIN)/amc model check

bench: $(STAMP)
	$(BIN)/python bench/kernel.py

clean:
	rm -rf $(VENV) .pytest_cache .hypothesis
