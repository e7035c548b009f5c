"""Shared test configuration."""

import os

from hypothesis import HealthCheck, settings

# "ci" runs more examples; the default profile keeps a local run quick.
settings.register_profile("default", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("ci", deadline=None, max_examples=300, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("ci" if os.environ.get("CI") else "default")

# pytest-xdist's workers (`make test` runs two) set COLUMNS=80 and LINES=24, which no test
# asked for: the CLI would then wrap its output at 80 columns. Its tests expect what a pipe
# gets in a plain run (no COLUMNS), and set COLUMNS themselves where they test a width.
if os.environ.get("PYTEST_XDIST_WORKER"):
    os.environ.pop("COLUMNS", None)
    os.environ.pop("LINES", None)

# Our own run validates every exchange of the conformance scenarios against specs/openapi.yaml
# (`amc.conformance.openapi_check`); `--validate-openapi SPEC` names another document.
pytest_plugins = ["amc.conformance.openapi_check"]


def pytest_configure(config):
    from pathlib import Path

    from amc.conformance import openapi_check

    given = config.getoption(openapi_check.OPTION) or os.environ.get(openapi_check.ENV)
    spec = Path(given) if given else Path(__file__).resolve().parents[1] / "specs" / "openapi.yaml"
    openapi_check.enable(config, spec)
