"""Waits, assertions, ui_tree and the app actions through ppadb against the simulator."""

from __future__ import annotations

import itertools
import json

import pytest

from amc.adapters.adb.errors import StepFailed
from amc.sim import programs

from .helpers import SERIAL, dump_xml

req = pytest.mark.req


def settings(executor):
    executor.run("launch", {"package": "com.android.settings"})


def changing_screen(monkeypatch):
    """Make every dump show a new text, as an animation would."""
    counter = itertools.count()

    def uiautomator(inv):
        path = inv.args[1]
        inv.device.files[path] = dump_xml({"text": f"frame {next(counter)}", "bounds": (0, 0, 100, 100)}).encode()
        inv.out(f"UI hierchary dumped to: {path}\n")
        return 0

    monkeypatch.setitem(programs.REGISTRY, "uiautomator", uiautomator)


@req("UI/s8")
def test_wait_for_an_element_on_the_screen_reports_it(executor):
    settings(executor)
    outcome = json.loads(executor.run("wait_for", {"target": {"text_contains": "network"}}).output)
    assert outcome["element"]["text"] == "Network & internet" and outcome["waited_ms"] >= 0


@req("UI/s8")
def test_wait_for_fails_after_its_timeout_quoting_the_screen(executor, sim):
    settings(executor)
    with pytest.raises(StepFailed) as caught:
        executor.run("wait_for", {"target": {"text": "Log in"}, "timeout_seconds": 0.5})
    assert caught.value.reason.startswith('text "Log in" not visible after 0.5 s; the screen showed: "Settings", ')
    assert len(caught.value.commands) >= 3, "it looked more than once"


@req("UI/s8")
def test_wait_for_gone(executor):
    settings(executor)
    outcome = json.loads(executor.run("wait_for", {"target": {"text": "Log in"}, "gone": True}).output)
    assert outcome["gone"] is True
    with pytest.raises(StepFailed) as caught:
        executor.run("wait_for", {"target": {"text": "Display"}, "gone": True, "timeout_seconds": 0.3})
    assert caught.value.reason.startswith('text "Display" still visible after 0.3 s: [')


@req("UI/s8")
def test_assertions_pass_or_fail_the_step(executor):
    settings(executor)
    assert json.loads(executor.run("assert_visible", {"target": {"text": "Display"}}).output)["element"]["text"] == (
        "Display"
    )
    assert json.loads(executor.run("assert_not_visible", {"target": {"text": "Log in"}}).output) == {"visible": False}
    with pytest.raises(StepFailed, match=r'^text "Log in" is not visible; the screen showed: "Settings"'):
        executor.run("assert_visible", {"target": {"text": "Log in"}})
    with pytest.raises(StepFailed, match=r'^text "Display" is visible: \[\d+\] TextView "Display" '):
        executor.run("assert_not_visible", {"target": {"text": "Display"}})


@pytest.mark.parametrize("action", ["wait_for", "assert_visible", "assert_not_visible", "scroll_until_visible"])
def test_actions_that_take_no_index_refuse_one(executor, sim, action):
    with pytest.raises(StepFailed, match=r"this action takes a selector, not target\.index"):
        executor.run(action, {"target": {"index": 0}})
    assert sim.log(SERIAL) == []


@req("UI/s9")
def test_wait_for_idle_on_a_still_screen(executor, sim):
    settings(executor)
    outcome = json.loads(executor.run("wait_for_idle", {"quiet_ms": 200}).output)
    assert outcome["idle"] is True and outcome["waited_ms"] >= 200


@req("UI/s9")
def test_a_screen_that_keeps_changing_is_never_idle_and_observations_say_so(executor, monkeypatch):
    changing_screen(monkeypatch)
    with pytest.raises(
        StepFailed, match=r"^the screen did not settle within 0\.5 s: it never stayed unchanged for 0\.1 s"
    ):
        executor.run("wait_for_idle", {"quiet_ms": 100, "timeout_seconds": 0.5})
    assert json.loads(executor.run("ui_tree", {}).output)["settled"] is False
    assert json.loads(executor.run("ui_dump", {}).output) == {"settled": False}
    assert "settled" not in json.loads(executor.run("ui_tree", {"settle": False}).output)


@req("UI/s12")
def test_ui_tree_lists_the_compact_elements_and_diffs_against_the_previous_tree(executor, sim):
    settings(executor)
    first = json.loads(executor.run("ui_tree", {"diff": True}).output)
    assert first["screen"] == {"width": 1080, "height": 2400, "rotation": 0}
    texts = [e["text"] for e in first["elements"] if e["text"]]
    assert texts[:2] == ["Settings", "Network & internet"]
    assert [e["index"] for e in first["elements"]] == list(range(len(first["elements"])))
    assert first["diff"]["added"] == first["elements"] and first["diff"]["removed"] == []
    same = json.loads(executor.run("ui_tree", {"diff": True}).output)
    assert same["diff"] == {"added": [], "removed": [], "changed": []}
    executor.run("tap", {"target": {"text": "Network & internet"}})
    after = json.loads(executor.run("ui_tree", {"diff": True}).output)
    assert after["fingerprint"] != first["fingerprint"]
    changes = after["diff"]
    gone = [e["text"] for e in changes["removed"]] + [pair["before"]["text"] for pair in changes["changed"]]
    new = [e["text"] for e in changes["added"]] + [pair["after"]["text"] for pair in changes["changed"]]
    assert "Display" in gone and "Display" not in new
    assert "Internet" in new and "Internet" not in gone


@req("UI/s10")
def test_app_actions_send_their_commands(executor, sim):
    executor.run("stop_app", {"package": "com.android.settings"})
    executor.run("open_url", {"url": "https://example.com/a?b=c&d=e"})
    assert sim.commands(SERIAL)[:2] == [
        "am force-stop com.android.settings",
        "am start -a android.intent.action.VIEW -d 'https://example.com/a?b=c&d=e'",
    ]


@req("UI/s10")
def test_clear_app_data_fails_unless_pm_says_success(executor, sim):
    executor.run("clear_app_data", {"package": "com.android.settings"})
    with pytest.raises(StepFailed, match=r"pm clear did not clear com\.example\.nothing's data: it said Failed"):
        executor.run("clear_app_data", {"package": "com.example.nothing"})


@req("UI/s10")
def test_list_apps_flags_third_party_packages(executor, sim):
    everything = json.loads(executor.run("list_apps", {}).output)["packages"]
    third = json.loads(executor.run("list_apps", {"third_party": True}).output)["packages"]
    assert {"package": "com.android.settings", "third_party": False} in everything
    assert {"package": "com.example.app", "third_party": True} in everything
    assert third == [p for p in everything if p["third_party"]]
    assert sim.commands(SERIAL)[-3:] == ["pm list packages -3", "pm list packages", "pm list packages -3"]


@req("UI/s10")
def test_set_orientation_fixes_the_rotation(executor, sim):
    executor.run("set_orientation", {"orientation": "landscape"})
    assert sim.commands(SERIAL) == [
        "settings put system accelerometer_rotation 0 && settings put system user_rotation 1"
    ]
