"""The host action policy, alone and in front of the executor."""

from __future__ import annotations

import json

import pytest

from amc.adapters.adb.errors import ActionRefused, StepFailed
from amc.adapters.adb.policy import ActionPolicy, PolicyError, split_simple_commands

from .helpers import SERIAL

req = pytest.mark.req

POLICY = {
    "actions": {"deny": ["swipe"]},
    "shell": {"allow": ["getprop*", "echo *", "sleep *"], "deny": ["*reboot*", "echo *secret*"]},
    "packages": {"allow": ["com.example.*", "com.android.*"], "deny": ["com.android.vending"]},
}


@pytest.fixture
def policy(tmp_path):
    path = tmp_path / "policy.json"
    path.write_text(json.dumps(POLICY))
    return ActionPolicy.load(path)


@pytest.mark.parametrize(
    "action, args, allowed",
    [
        ("tap", {"x": 1, "y": 1}, True),
        ("swipe", {}, False),
        ("shell", {"command": "getprop ro.product.model"}, True),
        ("shell", {"command": "echo hi && sleep 1 | echo done"}, True),
        ("shell", {"command": "echo hi; rm -rf /sdcard"}, False),  # every piece must be allowed
        ("shell", {"command": "echo hi\nrm -rf /sdcard"}, False),
        ("shell", {"command": "echo 'a; rm -rf /'"}, True),  # quoted: one piece
        ("shell", {"command": "echo $(rm -rf /)"}, False),
        ("shell", {"command": "echo `rm -rf /`"}, False),
        ("shell", {"command": "echo my secret"}, False),  # deny wins over allow
        ("shell", {"command": "getprop; 'reboot'"}, False),  # deny sees unquoted words
        ("shell", {"command": "echo 'unbalanced"}, False),
        ("launch", {"package": "com.example.app"}, True),
        ("launch", {"package": "com.android.vending"}, False),
        ("launch", {"package": "org.other.app"}, False),
        # The other actions that name an app obey the package rules too.
        ("stop_app", {"package": "com.example.app"}, True),
        ("stop_app", {"package": "com.android.vending"}, False),
        ("clear_app_data", {"package": "org.other.app"}, False),
        ("clear_app_data", {"package": "com.example.app"}, True),
        ("open_url", {"url": "https://example.com/"}, True),
        ("tap", {"target": {"text": "Log in"}}, True),
    ],
)
def test_policy_decisions(policy, action, args, allowed):
    assert (policy.refusal(action, args) is None) == allowed


def test_default_policy_allows_everything():
    assert ActionPolicy().refusal("shell", {"command": "reboot; echo $(id)"}) is None


def test_empty_allow_list_allows_nothing():
    policy = ActionPolicy.from_dict({"shell": {"allow": []}})
    assert "matches no allowed pattern" in policy.refusal("shell", {"command": "true"})


def test_simple_command_split():
    assert split_simple_commands("a 'b c' && d|e; (f) & g\nh") == ["a b c", "d", "e", "f", "g", "h"]
    assert split_simple_commands("echo hi > /sdcard/x") == ["echo hi > /sdcard/x"]


@pytest.mark.parametrize(
    "data",
    [
        [],
        {"shel": {}},
        {"shell": {"allow": "echo *"}},
        {"shell": {"permit": []}},
        {"shell": {"deny": [1]}},
    ],
)
def test_invalid_policies_are_rejected(data):
    with pytest.raises(PolicyError):
        ActionPolicy.from_dict(data)


def test_unreadable_policy_file(tmp_path):
    (tmp_path / "bad.json").write_text("{not json")
    with pytest.raises(PolicyError, match="cannot read policy"):
        ActionPolicy.load(tmp_path / "bad.json")


def test_refused_actions_never_reach_the_device(make_executor, policy, sim):
    executor = make_executor(policy=policy)
    with pytest.raises(ActionRefused, match="denied by pattern") as caught:
        executor.run("launch", {"package": "com.android.vending"})
    assert not isinstance(caught.value, StepFailed), "a refusal is not a failure"
    with pytest.raises(ActionRefused, match="no allowed pattern"):
        executor.run("shell", {"command": "echo hi; input tap 1 1"})
    with pytest.raises(ActionRefused):
        executor.run("swipe", {"x1": 1, "y1": 1, "x2": 2, "y2": 2})
    assert sim.log(SERIAL) == []
    assert executor.run("shell", {"command": "echo allowed"}).output == "allowed\n"


@pytest.mark.parametrize(
    "rules, refused",
    [
        ({"deny": ["ui_dump"]}, {"ui_dump"}),
        ({"deny": ["logcat"]}, {"logcat"}),
        ({"allow": ["screenshot", "ui_dump"]}, {"logcat"}),
        ({"deny": ["*"]}, {"ui_dump", "logcat"}),
    ],
)
def test_the_observation_actions_obey_the_action_rules(make_executor, sim, rules, refused):
    executor = make_executor(policy=ActionPolicy.from_dict({"actions": rules}))
    for action, args in (("ui_dump", {}), ("logcat", {"lines": 5})):
        if action in refused:
            with pytest.raises(ActionRefused, match=repr(action)):
                executor.run(action, args)
        else:
            assert executor.run(action, args).artifact.exists()
    sent = " ".join(sim.commands(SERIAL))
    assert ("uiautomator" in sent) == ("ui_dump" not in refused)
    assert ("logcat" in sent) == ("logcat" not in refused)


@req("UI/s10")
def test_every_action_of_the_table_can_be_denied_by_name(make_executor, sim):
    executor = make_executor(policy=ActionPolicy.from_dict({"actions": {"deny": ["clear_app_data", "type", "ui_*"]}}))
    for action, args in [
        ("clear_app_data", {"package": "com.example.app"}),
        ("type", {"text": "x"}),
        ("ui_tree", {}),
        ("ui_dump", {}),
    ]:
        with pytest.raises(ActionRefused, match=repr(action)):
            executor.run(action, args)
    assert sim.log(SERIAL) == [], "nothing reached the device"
    executor.run("wait_for_idle", {"quiet_ms": 0})
