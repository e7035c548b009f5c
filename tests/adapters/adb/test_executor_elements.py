"""Element actions through ppadb against the simulator: targets read from a fresh dump, the
outcome's element and point, index staleness, gestures' device commands, typing and its IME."""

from __future__ import annotations

import base64
import json
import re

import pytest

from amc.adapters.adb import commands
from amc.adapters.adb.errors import StepFailed
from amc.core.ui.selectors import NO_OBSERVATION, SCREEN_CHANGED
from amc.sim import programs

from .helpers import SERIAL

req = pytest.mark.req

SUPERVISED = re.compile(r"^sh -c '(?P<command>.*)' amc-step-(?P<token>[0-9a-f]+); echo amc-exit-(?P=token):\$\?$")
DUMP = re.compile(r"^uiautomator dump \S+ && cat \S+ && rm -f \S+$")


def sent(sim, serial=SERIAL) -> list[str]:
    """The device commands, supervised dumps shown as "dump"."""
    out = []
    for command in sim.commands(serial):
        inner = SUPERVISED.match(command)
        out.append("dump" if inner and DUMP.match(inner.group("command")) else command)
    return out


def settings(executor, sim) -> int:
    """Open the Settings app; return how many commands were sent so far."""
    executor.run("launch", {"package": "com.android.settings"})
    return len(sim.commands(SERIAL))


def new_commands(sim, since: int) -> list[str]:
    return sent(sim)[since:]


def element_named(output: str, text: str) -> dict:
    return next(e for e in json.loads(output)["elements"] if e["text"] == text)


@req("UI/s5", "UI/s6")
def test_tap_by_text_taps_the_centre_of_the_element_and_reports_both(executor, sim):
    since = settings(executor, sim)
    tree = executor.run("ui_tree", {"settle": False}).output
    row = element_named(tree, "Network & internet")
    left, top, right, bottom = row["bounds"]
    result = executor.run("tap", {"target": {"text": "Network & internet"}})
    outcome = json.loads(result.output)
    assert outcome["element"] == row
    assert outcome["point"] == [(left + right) // 2, (top + bottom) // 2]
    assert new_commands(sim, since)[-2:] == ["dump", f"input tap {outcome['point'][0]} {outcome['point'][1]}"]
    assert sim.device(SERIAL).foreground.endswith("NetworkDashboardActivity")


@req("UI/s3", "UI/s6")
def test_a_target_that_matches_nothing_fails_quoting_the_screen(executor, sim):
    settings(executor, sim)
    with pytest.raises(StepFailed) as caught:
        executor.run("tap", {"target": {"text": "Log in"}})
    assert caught.value.reason.startswith('no element matches text "Log in"; the screen showed: "Settings", ')
    assert not [c for c in sim.commands(SERIAL) if c.startswith("input tap")], "nothing was tapped"


def test_a_bad_target_fails_with_the_selector_sentence(executor, sim):
    with pytest.raises(StepFailed, match="argument 'target': target has an unknown key 'txt'"):
        executor.run("tap", {"target": {"txt": "x"}})
    assert sim.log(SERIAL) == []


@req("UI/s4")
def test_an_index_needs_an_observation_and_a_screen_that_did_not_change(executor, sim):
    settings(executor, sim)
    with pytest.raises(StepFailed) as caught:
        executor.run("tap", {"target": {"index": 1}})
    assert caught.value.reason == NO_OBSERVATION
    tree = json.loads(executor.run("ui_tree", {}).output)
    index = element_named(executor.run("ui_tree", {}).output, "Display")["index"]
    assert tree["elements"][index]["text"] == "Display"
    done = json.loads(executor.run("tap", {"target": {"index": index}}).output)
    assert done["element"]["text"] == "Display"
    # The tap opened another page: the observation no longer describes the screen.
    with pytest.raises(StepFailed) as caught:
        executor.run("tap", {"target": {"index": index}})
    assert caught.value.reason == SCREEN_CHANGED
    # A screenshot is an observation too (see test_executor_observations); so is ui_tree again.
    executor.run("ui_tree", {})
    executor.run("tap", {"target": {"index": 0}})


@req("UI/s6")
def test_double_tap_and_long_press_send_one_command_each(executor, sim):
    since = settings(executor, sim)
    executor.run("double_tap", {"x": 10, "y": 20})
    executor.run("long_press", {"x": 30, "y": 40})
    executor.run("long_press", {"x": 30, "y": 40, "duration_ms": 600})
    assert new_commands(sim, since) == [
        "input tap 10 20; input tap 10 20",
        "input swipe 30 40 30 40 1000",
        "input swipe 30 40 30 40 600",
    ]
    result = executor.run("long_press", {"target": {"text": "Display"}, "duration_ms": 700})
    x, y = json.loads(result.output)["point"]
    assert sent(sim)[-1] == f"input swipe {x} {y} {x} {y} 700"


@req("UI/s6")
def test_swipe_and_scroll_by_direction_cross_the_middle_of_their_area(executor, sim):
    since = settings(executor, sim)
    executor.run("swipe", {"direction": "left"})
    executor.run("scroll", {"direction": "down"})
    executor.run("scroll", {"direction": "right"})
    # 1080x2400: 60% of the width or height through the centre; scroll moves the finger the other way.
    assert [c for c in new_commands(sim, since) if c != "dump"] == [
        "input swipe 864 1200 216 1200 300",
        "input swipe 540 1920 540 480 400",
        "input swipe 864 1200 216 1200 400",
    ]
    result = json.loads(executor.run("swipe", {"direction": "up", "target": {"text": "Display"}}).output)
    left, top, right, bottom = result["element"]["bounds"]
    x1, y1 = result["point"]
    x2, y2 = result["to"]
    assert x1 == x2 == (left + right) // 2 and top <= y2 < y1 < bottom


@req("UI/s6")
def test_back_home_and_enter_are_key_events(executor, sim):
    since = settings(executor, sim)
    for action in ("enter", "back", "home"):
        executor.run(action, {})
    assert new_commands(sim, since) == [
        "input keyevent KEYCODE_ENTER",
        "input keyevent KEYCODE_BACK",
        "input keyevent KEYCODE_HOME",
    ]


@req("UI/s6")
def test_scroll_until_visible_stops_when_the_screen_stops_moving(executor, sim):
    settings(executor, sim)
    with pytest.raises(StepFailed) as caught:
        executor.run("scroll_until_visible", {"target": {"text": "Nowhere"}, "max_swipes": 5})
    assert caught.value.reason.startswith(
        'text "Nowhere" not visible: the screen stopped moving after 1 scroll(s) down'
    )
    found = json.loads(executor.run("scroll_until_visible", {"target": {"text": "Display"}}).output)
    assert (found["element"]["text"], found["swipes"]) == ("Display", 0)


@req("UI/s7")
def test_type_taps_its_target_then_clears_by_keys_and_types(executor, sim, monkeypatch):
    executor.run("launch", {"package": "com.example.app"})
    field = next(e for e in json.loads(executor.run("ui_tree", {}).output)["elements"] if e["editable"])
    executor.run("type", {"text": "abc", "target": {"index": field["index"]}})
    assert sim.device(SERIAL).typed_text == "abc"
    since = len(sim.commands(SERIAL))
    result = executor.run("type", {"text": "hi you", "target": {"class": "EditText"}, "clear": True})
    outcome = json.loads(result.output)
    assert outcome["element"]["editable"] and outcome["point"]
    deletes = " ".join(["KEYCODE_DEL"] * len(outcome["element"]["text"]))
    assert new_commands(sim, since)[1:] == [
        f"input tap {outcome['point'][0]} {outcome['point'][1]}",
        f"input keyevent KEYCODE_MOVE_END {deletes} && input text hi%syou",
    ]


@req("UI/s7")
def test_empty_text_needs_clear(executor, sim):
    with pytest.raises(StepFailed, match="text may be empty only with clear: true"):
        executor.run("type", {"text": ""})
    assert sim.log(SERIAL) == []


def input_method(answer: str):
    def settings_program(inv):
        if inv.args[:3] == ["get", "secure", "default_input_method"]:
            inv.out(answer + "\n")
            return 0
        return 1

    return settings_program


@req("UI/s7")
@pytest.mark.parametrize("current", ["com.google.android.inputmethod.latin/.LatinIME", ""])
def test_non_ascii_text_without_the_adb_keyboard_fails_naming_it_and_types_nothing(executor, sim, monkeypatch, current):
    monkeypatch.setitem(programs.REGISTRY, "settings", input_method(current))
    executor.run("launch", {"package": "com.example.app"})
    since = len(sim.commands(SERIAL))
    with pytest.raises(StepFailed) as caught:
        executor.run("type", {"text": "héllo", "target": {"class": "EditText"}, "clear": True})
    assert caught.value.reason == (
        "typing non-ASCII text needs the ADB keyboard (com.android.adbkeyboard/.AdbIME) as the input method; "
        f"the device's is {current or 'not set'}"
    )
    assert sent(sim)[since:] == [commands.INPUT_METHOD], "nothing tapped, cleared or typed"
    assert sim.device(SERIAL).typed_text == ""


@req("UI/s7")
def test_non_ascii_text_goes_through_the_adb_keyboard_broadcast(executor, sim, monkeypatch):
    monkeypatch.setitem(programs.REGISTRY, "settings", input_method(commands.ADB_KEYBOARD))
    broadcasts = []

    def am(inv):
        broadcasts.append(inv.args)
        inv.out("Broadcasting: Intent { act=... }\nBroadcast completed: result=0\n")
        return 0

    monkeypatch.setitem(programs.REGISTRY, "am", am)
    executor.run("type", {"text": "héllo wörld", "clear": True})
    clear, typed = broadcasts
    assert clear == ["broadcast", "-a", "ADB_CLEAR_TEXT"]
    assert typed[:5] == ["broadcast", "-a", "ADB_INPUT_B64", "--es", "msg"]
    assert base64.b64decode(typed[5]).decode("utf-8") == "héllo wörld"


@req("UI/s7")
def test_on_a_device_with_the_adb_keyboard_non_ascii_text_replaces_the_field(executor, sim):
    sim.set_broadcast_ime(SERIAL)
    executor.run("launch", {"package": "com.example.app"})
    executor.run("type", {"text": "ada", "target": {"resource_id": "username"}})
    result = json.loads(
        executor.run("type", {"text": "Zoë 東京", "target": {"resource_id": "username"}, "clear": True}).output
    )
    assert result["element"]["resource_id"] == "com.example.app:id/username"
    field = next(e for e in json.loads(executor.run("ui_tree", {}).output)["elements"] if e["editable"])
    assert field["text"] == "Zoë 東京"


@req("UI/s7")
def test_on_a_device_without_it_the_stock_keyboard_is_named(executor, sim):
    executor.run("launch", {"package": "com.example.app"})
    with pytest.raises(StepFailed, match=r"needs the ADB keyboard .*; the device's is \S+") as caught:
        executor.run("type", {"text": "Zoë", "target": {"resource_id": "username"}})
    assert "AdbIME" not in caught.value.reason.rsplit(";", 1)[1]


def texts_on_screen(executor) -> list[str]:
    return [e["text"] for e in json.loads(executor.run("ui_tree", {"settle": False}).output)["elements"] if e["text"]]


@req("UI/s6")
def test_double_tap_and_long_press_on_their_targets(executor):
    executor.run("launch", {"package": "com.example.app"})
    executor.run("tap", {"target": {"text": "Gestures"}})
    executor.run("double_tap", {"target": {"text": "Double-tap me"}})
    assert "Double-tapped" in texts_on_screen(executor)
    executor.run("long_press", {"target": {"text": "Press and hold"}, "duration_ms": 600})
    assert {"Copy", "Delete"} <= set(texts_on_screen(executor))


@req("UI/s6")
def test_scroll_until_visible_brings_a_row_of_a_long_list_into_view(executor):
    executor.run("launch", {"package": "com.example.app"})
    executor.run("tap", {"target": {"text": "Catalogue"}})
    assert "Item 30" not in texts_on_screen(executor)
    found = json.loads(executor.run("scroll_until_visible", {"target": {"text": "Item 30"}}).output)
    assert found["element"]["text"] == "Item 30" and 1 <= found["swipes"] <= 10
    executor.run("tap", {"target": {"text": "Item 30"}})
    with pytest.raises(StepFailed, match=r'^text "Item 1" not visible after 1 scroll\(s\) down; the screen showed'):
        executor.run("scroll_until_visible", {"target": {"text": "Item 1"}, "max_swipes": 1})
    back = json.loads(executor.run("scroll_until_visible", {"target": {"text": "Item 1"}, "direction": "up"}).output)
    assert back["element"]["text"] == "Item 1"


@req("UI/s10")
def test_landscape_swaps_the_screen_and_the_frame(executor):
    executor.run("launch", {"package": "com.example.app"})
    executor.run("set_orientation", {"orientation": "landscape"})
    shot = json.loads(executor.run("screenshot", {"scale": 0.5}).output)
    assert shot["screen"] == {"width": 2400, "height": 1080, "rotation": 1}
    assert (shot["image"]["width"], shot["image"]["height"]) == (1200, 540)
    executor.run("set_orientation", {"orientation": "portrait"})
    assert json.loads(executor.run("ui_tree", {}).output)["screen"]["rotation"] == 0
