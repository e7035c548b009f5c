"""The contract fuzzer's bounded run: 60 generated requests per operation of
specs/openapi.yaml against a real `amc serve` (see fuzzing.py). `make fuzz` runs the
same test with AMC_FUZZ_CASES set higher and prints the figures of docs/reliability.md."""

from __future__ import annotations

import pytest

from tests.adapters.http.fuzzing import OPERATIONS, Counts, Served, cases_per_operation, fuzz, seed

CASES = cases_per_operation(200)  # "a few hundred" per operation in make test; make fuzz: 600
TOTAL = Counts()


@pytest.fixture(scope="module", autouse=True)
def figures():
    yield
    print(f"\ncontract fuzzing, {CASES} cases per operation:\n{TOTAL.summary()}")


@pytest.mark.slow
@pytest.mark.req("ACCESS/s1")
@pytest.mark.parametrize("label", sorted(OPERATIONS))
def test_no_generated_request_gets_a_5xx_a_response_off_the_contract_or_a_refusal_that_changes_state(label, tmp_path):
    served = Served(tmp_path / "data")
    try:
        counts = fuzz(label, served, seed(served), CASES)
    finally:
        served.stop()
    TOTAL.add(counts)
    assert not counts.failures, "\n\n".join(counts.findings[:5])
    assert counts.requests >= min(CASES, 1)
    assert not any("Traceback" in line for line in served.stderr), "".join(served.stderr)
