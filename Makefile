# The quick start: `make demo` runs amc on an embedded default; `make test` runs every test.
# Both create the virtualenv in .venv on first use, with nothing but Python installed.

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
MUTANTS ?= 24

.PHONY: test demo bench check mutation clean

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

# Every named break of the kernel caught, then a sampled mutation score over amc/core
# against tests/model (tools/mutation_check.py; about ten minutes on two cores).
mutation: $(STAMP)
	$(BIN)/python tools/mutation_check.py
	$(BIN)/python tools/mutation_check.py --sample $(MUTANTS)

bench: $(STAMP)
	$(BIN)/python bench/kernel.py

clean:
	rm -rf $(VENV) .pytest_cache .hypothesis
