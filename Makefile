# The quick start: `make demo` runs amc on an embedded default; `make test` runs every test;
# `make lint` checks style and types.
# Each creates the virtualenv in .venv on first use, with nothing but Python installed.

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
MUTANTS ?= 24
FUZZ_CASES ?= 600
CRASH_KILLS ?= 20
CRASH_CLIENTS ?= 30
DISK_FULL_CYCLES ?= 10
ABUSE_SECONDS ?= 30

.PHONY: test lint demo soak bench bench-inputs bench-record bench-artifacts bench-console bench-sessions bench-mcp bench-observe console-pictures check mutation fuzz crash abuse failover watch-failover bench-postgres conformance-postgres bench-events clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e ".[test]"
	touch $(STAMP)

# Two processes, each taking whole test files (module-scoped stacks stay in one process);
# TEST_PROCESSES=0 runs in this process.
TEST_PROCESSES ?= 2
test: $(STAMP)
	$(BIN)/python -m pytest -n $(TEST_PROCESSES) --dist loadfile $(PYTEST_ARGS)

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
# (over 10,000 in all) against a real amc serve; prints the figures of docs/reliability.md.
# `make test` runs the same test with 200 per operation.
fuzz: $(STAMP)
	AMC_FUZZ_CASES=$(FUZZ_CASES) $(BIN)/python -m pytest -q -s -p no:cacheprovider --timeout 1800 tests/adapters/http/test_fuzz.py

# The crash test and the full disk at length: CRASH_KILLS SIGKILLs of a real amc serve under
# CRASH_CLIENTS clients and as many hosts, and DISK_FULL_CYCLES fills and frees of its file
# system (mounting a tmpfs needs root); prints the figures of docs/reliability.md.
# `make test` runs the same tests with 5 kills and 2 cycles.
crash: $(STAMP)
	AMC_CRASH_KILLS=$(CRASH_KILLS) AMC_CRASH_CLIENTS=$(CRASH_CLIENTS) AMC_DISK_FULL_CYCLES=$(DISK_FULL_CYCLES) \
		$(BIN)/python -m pytest -q -s -p no:cacheprovider --timeout 1800 \
		tests/adapters/http/test_crash_http.py tests/adapters/http/test_crash_inputs.py tests/adapters/http/test_full_disk.py

# Slow and abusive clients at length: phases of ABUSE_SECONDS (quiet, abused, quiet) against a
# real amc serve; prints the latency ratio of docs/reliability.md. `make test` runs the
# same test with 6 s phases.
abuse: $(STAMP)
	AMC_ABUSE_SECONDS=$(ABUSE_SECONDS) $(BIN)/python -m pytest -q -s -p no:cacheprovider tests/adapters/http/test_abuse.py

bench: $(STAMP)
	$(BIN)/python bench/kernel.py

# Artifact uploads over HTTP against a real amc serve: MB/s and p50/p99 for 200 KiB and 2 MiB
# from 1 and 8 hosts, the ratio to raw durable files, renewals/s quiet and during uploads.
# About 1-2 minutes; figures in bench/RESULTS-artifacts.md.
bench-artifacts: $(STAMP)
	$(BIN)/python bench/artifacts_upload.py

# Input uploads against raw durable writes, and the Host Agent's input cache; about a minute.
# Figures in docs/benchmarks.md (Inputs).
bench-inputs: $(STAMP)
	$(BIN)/python bench/inputs.py

# Step durations with and without a screen recording; under a minute. Figures in
# docs/benchmarks.md (Screen recording).
bench-record: $(STAMP)
	$(BIN)/python bench/record.py

# The web console's load times in headless Chromium: 1,000 devices on 100 hosts, 100,000
# tasks (bench/RESULTS-console.md). About 2 minutes; needs /usr/bin/chromium.
bench-console: $(STAMP)
	$(BIN)/python bench/console.py

# Retake the console's pictures in docs/ that the README and docs/console.md show (runs the browser tests).
console-pictures: $(STAMP)
	AMC_CONSOLE_PICTURES=1 $(BIN)/python -m pytest -q -p no:cacheprovider tests/browser
# Session action round trip (Part D), 1 and 50 concurrent sessions; about 30 s.
# Figures in bench/RESULTS-sessions.md.
bench-sessions: $(STAMP)
	$(BIN)/python bench/sessions.py

# The PostgreSQL store (each starts a throwaway cluster of Debian's PostgreSQL; see tests/support/postgres.py).
# failover: two amc serve on one database under load, the leader SIGKILLed KILLS times; prints kill-to-lead and
# kill-to-first-renewal times and the acknowledged commands checked / lost (exits 1 on any loss). About 2 minutes.
KILLS ?= 10
failover: $(STAMP)
	PYTHONPATH=. $(BIN)/python -P bench/failover.py --kills $(KILLS)

# The leader SIGKILLed while `amc task watch`, a claim long poll, a session's action wait and an
# event-stream reader are open on it: WATCH_RUNS runs at each of WATCH_OFFSETS (seconds after
# the watch started); prints the seconds from kill to each client on the new leader, the
# figures of docs/reliability.md. About 10 minutes. `make test` runs offsets 0.5 s and 2 s once.
WATCH_RUNS ?= 10
WATCH_OFFSETS ?= 0.5,1,2,3,5,10
watch-failover: $(STAMP)
	PYTHONPATH=. $(BIN)/python -P bench/watch_failover.py --runs $(WATCH_RUNS) --offsets $(WATCH_OFFSETS)

# The whole conformance suite against amc serve --store postgresql://... (restarts included); about 2 minutes.
conformance-postgres: $(STAMP)
	PYTHONPATH=. $(BIN)/python -P -c "import sys; from tests.adapters.postgres.test_conformance import main; sys.exit(main())"

# Durable commands/s with 1, 8 and 64 callers: amc on PostgreSQL, amc on LMDB and a SKIP LOCKED job-queue peer.
bench-postgres: $(STAMP)
	PYTHONPATH=. $(BIN)/python -P bench/postgres.py

# The event stream's delay from a commit to a reader under 1,000 task changes/s (about 15 s;
# the figures are in bench/RESULTS-events.md).
bench-events: $(STAMP)
	$(BIN)/python bench/events.py

# The action round trip of a session through `amc mcp` and directly (~2 minutes; bench/RESULTS-mcp.md).
bench-mcp: $(STAMP)
	$(BIN)/python bench/mcp.py

# Observations and element actions on the simulator through the real adb server, alone and in a
# session (screenshot raw+host against screencap -p, scale, marks, settle; tap by selector against
# by point; observe). About 2 minutes; needs Debian's adb. Figures in docs/benchmarks.md.
bench-observe: $(STAMP)
	$(BIN)/python bench/observe.py

clean:
	rm -rf $(VENV) .pytest_cache .hypothesis

# The soak (not in `make test`): SOAK_DEVICES simulated devices on SOAK_AGENTS Host Agents under a
# steady mixed load for SOAK_MINUTES, sampled every minute; judges leaks (fitted slopes), latency
# drift and errors, checks the recorded histories, writes soak.json. docs/reliability.md has the figures.
# PostgreSQL: make soak SOAK_STORE=postgresql SOAK_MINUTES=30
SOAK_MINUTES ?= 60
SOAK_STORE ?= lmdb
SOAK_DEVICES ?= 500
SOAK_AGENTS ?= 10
soak: $(STAMP)
	PYTHONPATH=. $(BIN)/python -P bench/soak.py --minutes $(SOAK_MINUTES) --store $(SOAK_STORE) \
		--devices $(SOAK_DEVICES) --agents $(SOAK_AGENTS) --json soak.json
