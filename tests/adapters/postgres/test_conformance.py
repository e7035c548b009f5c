"""The conformance suite against `amc serve --store postgresql://...`: its restart scenarios here
(a kill -9 and a new server on the same database); `make conformance-postgres` runs it whole."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]


def run_suite(url: str, *pytest_args: str) -> subprocess.CompletedProcess:
    # The suite's own server (`amc serve`) takes its store from AMC_STORE.
    env = {**os.environ, "AMC_STORE": url}
    return subprocess.run(
        [sys.executable, "-m", "pytest", "amc/conformance/scenarios", "-q", "-p", "no:cacheprovider", *pytest_args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )


def test_the_restart_scenarios_pass_on_the_postgresql_store(pg_url):
    result = run_suite(pg_url, "-k", "restart")
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    assert " passed" in result.stdout and "skipped" not in result.stdout.splitlines()[-1], result.stdout[-1000:]
    from amc.adapters.postgres.verify import verify

    assert verify(pg_url) == []  # the suite's commands went to this database


def main() -> int:
    """The whole suite on a throwaway cluster (`make conformance-postgres`); its exit status."""
    from tests.support.postgres import Cluster

    with Cluster(fsync=False) as cluster:
        url = cluster.new_database("conformance")
        result = run_suite(url)
        print(result.stdout[-3000:], result.stderr[-2000:])
        return result.returncode
