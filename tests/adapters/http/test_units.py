"""The HTTP edge's pure parts, without a server: plan validation, tokens, wire times."""

from __future__ import annotations

import json
import stat

import pytest

from amc.adapters.http.auth import Principal, TokenFileError, TokenTable
from amc.adapters.http.tokens_file import write_initial as write_initial_tokens
from amc.adapters.http.wire import rfc3339, seconds
from amc.core.errors import InvalidRequest
from amc.core.plans import parse_plan, plan_to_json
from amc.core.records import Plan, Stage, Step
from amc.core.times import to_rfc3339


def test_a_plan_of_steps_and_one_of_stages_parse_into_records():
    assert parse_plan({"steps": [{"id": "a", "action": "tap", "args": {"x": 1, "y": 2}}]}) == Plan(
        steps=(Step(id="a", action="tap", args={"x": 1, "y": 2}),)
    )
    staged = {"stages": [{"id": "s", "steps": [{"id": "a", "action": "screenshot"}]}]}
    plan = parse_plan(staged)
    assert plan == Plan(stages=(Stage(id="s", steps=(Step(id="a", action="screenshot", args={}),)),))
    assert plan_to_json(plan) == {"stages": [{"id": "s", "steps": [{"id": "a", "action": "screenshot", "args": {}}]}]}


@pytest.mark.parametrize(
    "raw, named",
    [
        ({"steps": [{"id": "a", "action": "tap", "args": {"x": 1, "y": True}}]}, "'a'"),
        ({"steps": [{"id": "a", "action": "wait", "args": {"seconds": 86401}}]}, "'a'"),
        ({"steps": [{"id": "a", "action": "launch", "args": {}}]}, "package"),
        ({"stages": [{"id": "s1", "steps": [{"id": "a", "action": "screenshot"}]}, {"id": "s2", "steps": []}]}, "'s2'"),
        ({"steps": [{"id": "", "action": "screenshot"}]}, "plan.steps[0]"),
        ({"steps": [{"id": "x" * 129, "action": "screenshot"}]}, "plan.steps[0]"),
    ],
)
def test_plan_refusals_name_the_step(raw, named):
    with pytest.raises(InvalidRequest) as refused:
        parse_plan(raw)
    assert named in refused.value.detail


def test_the_observation_actions_ui_dump_and_logcat():
    plan = parse_plan(
        {
            "steps": [
                {"id": "ui", "action": "ui_dump"},
                {"id": "log", "action": "logcat"},
                {"id": "tail", "action": "logcat", "args": {"lines": 50}},
            ]
        }
    )
    assert [(step.action, step.args) for step in plan.steps] == [
        ("ui_dump", {}),
        ("logcat", {}),
        ("logcat", {"lines": 50}),
    ]


@pytest.mark.parametrize(
    "step, expected",
    [
        ({"action": "ui_dump", "args": {"path": "/sdcard/x.xml"}}, "unknown argument 'path'"),
        ({"action": "logcat", "args": {"lines": 0}}, "1..10000"),
        ({"action": "logcat", "args": {"lines": 10_001}}, "1..10000"),
        ({"action": "logcat", "args": {"lines": 2.5}}, "1..10000"),
        ({"action": "logcat", "args": {"lines": True}}, "1..10000"),
        ({"action": "logcat", "args": {"lines": "200"}}, "1..10000"),
    ],
)
def test_observation_argument_refusals(step, expected):
    with pytest.raises(InvalidRequest) as refused:
        parse_plan({"steps": [{"id": "o", **step}]})
    assert "'o'" in refused.value.detail and expected in refused.value.detail


def test_the_plan_vocabulary_is_what_the_executor_runs():
    from amc.adapters.adb import commands
    from amc.adapters.adb.executor import AdbExecutor
    from amc.core import actions

    assert set(actions.ACTIONS) == set(AdbExecutor.ACTIONS)
    assert actions.MAX_LOGCAT_LINES == commands.MAX_LOGCAT_LINES


def test_tokens_are_found_by_value_only():
    table = TokenTable([("token-one", Principal(role="admin")), ("token-two", Principal(role="host", host_id="h1"))])
    assert table.lookup("token-one") == Principal(role="admin")
    assert table.authenticate("Bearer token-two").host_id == "h1"
    assert table.authenticate("bearer  token-two ").host_id == "h1"
    for wrong in ("token-on", "token-one ", "TOKEN-ONE", "", "token-one\x00"):
        assert table.lookup(wrong) is None
    assert table.authenticate(None) is None and table.authenticate("Basic token-one") is None


@pytest.mark.parametrize(
    "entries, complaint",
    [
        ({"token": "x"}, "list"),
        ([{"token": "abc", "role": "root"}], "role"),
        ([{"token": "abc", "role": "client"}], "tenant"),
        ([{"token": "abc", "role": "host"}], "host_id"),
        ([{"token": "abc", "role": "admin", "tenant": "t"}], "tenant"),
        ([{"token": "", "role": "admin"}], "token"),
        ([{"token": "abc", "role": "admin"}, {"token": "abc", "role": "admin"}], "twice"),
    ],
)
def test_bad_tokens_files_are_refused_without_echoing_tokens(entries, complaint):
    with pytest.raises(TokenFileError) as refused:
        TokenTable.from_data(entries)
    assert complaint in str(refused.value)
    assert "abc" not in str(refused.value)


def test_the_initial_tokens_file_is_private_and_never_overwritten(tmp_path):
    path = tmp_path / "data" / "tokens.json"
    entries = write_initial_tokens(path)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert json.loads(path.read_text()) == entries
    assert len(TokenTable.load(path)) == 3
    with pytest.raises(FileExistsError):
        write_initial_tokens(path)


def test_wire_times_and_seconds():
    for ms in (0, 1, 999, 1000, 1_764_460_800_123, 253_402_300_799_999):
        assert rfc3339(ms) == to_rfc3339(ms)
    assert seconds(30_000) == 30 and isinstance(seconds(30_000), int)
    assert seconds(1500) == 1.5
