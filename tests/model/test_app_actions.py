"""The arguments of install, uninstall, push and pull (specs/protocol.md Part F, "Actions that
take inputs"), checked through `parse_plan` as a submit checks them (APPS/s1)."""

from __future__ import annotations

from typing import Any

import pytest

from amc.core.plans import parse_plan
from tests.model.test_actions import refused

REF = {"input": "sha256:" + "ab" * 32}

GOOD: list[tuple[str, dict[str, Any]]] = [
    ("install", {"input": REF}),
    ("install", {"input": REF, "replace": False, "grant_permissions": True}),
    ("uninstall", {"package": "com.example.app"}),
    ("push", {"input": REF, "path": "/sdcard/Download/fixture.txt"}),
    ("push", {"input": REF, "path": "/data/local/tmp/a file with spaces"}),
    ("pull", {"path": "/sdcard/Download/out.json"}),
]

BAD: list[tuple[str, dict[str, Any], str, str]] = [
    ("install", {}, "'input'", "requires argument 'input'"),
    ("install", {"input": "sha256:" + "ab" * 32}, "'input'", "an input reference"),
    ("install", {"input": {"input": "sha256:AB"}}, "'input'", "an input reference"),
    ("install", {"input": REF, "replace": "yes"}, "'replace'", "true or false"),
    ("install", {"input": REF, "grant_permissions": 1}, "'grant_permissions'", "true or false"),
    ("install", {"input": REF, "package": "com.x.y"}, "'package'", "unknown argument"),
    ("uninstall", {}, "'package'", "requires argument 'package'"),
    ("uninstall", {"package": "x; reboot"}, "'package'", "a package name"),
    ("push", {"input": REF}, "'path'", "requires argument 'path'"),
    ("push", {"path": "/sdcard/x"}, "'input'", "requires argument 'input'"),
    ("push", {"input": REF, "path": "sdcard/x"}, "'path'", "an absolute file path"),
    ("push", {"input": REF, "path": "/sdcard/"}, "'path'", "an absolute file path"),
    ("pull", {"path": "/sdcard/a\nb"}, "'path'", "an absolute file path"),
    ("pull", {"path": "/" + "x" * 4096}, "'path'", "at most 4096"),
    ("pull", {"path": REF}, "'path'", "an absolute file path"),
    ("shell", {"command": REF}, "'command'", "non-empty string"),  # an input only where taken
]


@pytest.mark.req("APPS/s1")
@pytest.mark.parametrize(("action", "args"), GOOD, ids=[f"{a}-{i}" for i, (a, _) in enumerate(GOOD)])
def test_every_form_of_the_app_and_file_actions_is_accepted_as_given(action, args):
    step = parse_plan({"steps": [{"id": "s", "action": action, "args": args}]}).steps[0]
    assert (step.action, step.args) == (action, args)


@pytest.mark.req("APPS/s1")
@pytest.mark.parametrize(("action", "args", "member", "says"), BAD, ids=[f"{b[0]}-{i}" for i, b in enumerate(BAD)])
def test_every_bad_form_is_refused_naming_the_step_and_the_argument(action, args, member, says):
    detail = refused(action, args, step_id="app")
    assert detail.startswith("step 'app': "), detail
    assert member in detail and says in detail, detail
