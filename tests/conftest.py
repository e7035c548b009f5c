"""Shared test configuration."""

import os

from hypothesis import HealthCheck, settings

# "ci" runs more examples; the default profile keeps a local run quick.
settings.register_profile("default", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.register_profile(
    "ci", deadline=None, max_examples=300, suppress_health_check=[HealthCheck.too_slow]
)
settings.load_profile("ci" if os.environ.get("CI") else "default")
