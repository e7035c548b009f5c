# The quick start: `make demo` runs amc on an embedded default; `make test` runs every test;
# `make lint` checks style and types.
# Each creates the virtualenv in .venv on first use, with nothing but Python installed.

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
MUTANTS ?= 24
FUZZ_CASES ?= 600

.PHONY: test lint demo bench bench-sessions check mutation fuzz clean

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

# Every named break of the kernel caught (each by its first failing test; without -x the
# tool lists them all), then a sampled mutation score over amc/core against tests/model.
# About 20 minutes on a busy two-core machine.
mutation: $(STAMP)
	$(BIN)/python tools/mutation_check.py -- -x
	$(BIN)/python tools/mutation_check.py --sample $(MUTANTS)

# The contract fuzzer at length: FUZZ_CASES generated requests per operation of specs/openapi.yaml
# (over 10,000 in all) against a real amc serve; prints the figures of the README's "Reliability".
# `make test` runs the same test with 60 per operation.
fuzz: $(STAMP)
	AMC_FUZZ_CASES=$(FUZZ_CASES) $(BIN)/python -m pytest -q -s -p no:cacheprovider --timeout 1800 tests/adapters/http/test_fuzz.py

bench: $(STAMP)
	$(BIN)/python bench/kernel.py

# Session action round trip (Part D), 1 and 50 concurrent sessions; about 30 s.
# Figures in bench/RESULTS-sessions.md.
bench-sessions: $(STAMP)
	$(BIN)/python bench/sessions.py

clean:
	rm -rf $(VENV) .pytest_cache .hypothesis
