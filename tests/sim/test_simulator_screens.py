"""What the simulated screen shows and logs: uiautomator dumps, logcat, screenshots per
state, and taps that navigate (driven directly, no sockets; plus one pull over ppadb)."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ElementTree

import pytest

from amc.adapters.adb._ppadb import Client
from amc.sim.device import SimDevice
from amc.sim.png import png_size
from amc.sim.spec import SimDeviceSpec
from tests.support.waiting import eventually

from .helpers import BufferSink, run

SETTINGS = "com.android.settings/.Settings"
NETWORK = "com.android.settings/.Settings$NetworkDashboardActivity"
EXAMPLE = "com.example.app/.MainActivity"
DUMPED = "UI hierchary dumped to: "  # the real tool's spelling
THREADTIME = re.compile(r"^\d\d-\d\d \d\d:\d\d:\d\d\.\d{3} +\d+ +\d+ [VDIWEF] .+?: .*$")


def dump(device: SimDevice) -> ElementTree.Element:
    output = run(device, "uiautomator dump /dev/tty")
    xml, _, confirmation = output.rpartition(DUMPED)
    assert confirmation == "/dev/tty\n"
    return ElementTree.fromstring(xml)


def texts(root: ElementTree.Element) -> list[str]:
    return [node.get("text") for node in root.iter("node") if node.get("text")]


def centre(root: ElementTree.Element, text: str) -> tuple[int, int]:
    """Where to tap to hit the node showing `text` (as an agent reading the dump would)."""
    node = next(node for node in root.iter("node") if node.get("text") == text)
    x1, y1, x2, y2 = map(int, re.findall(r"\d+", node.get("bounds")))
    return (x1 + x2) // 2, (y1 + y2) // 2


def screenshot(device: SimDevice) -> bytes:
    sink = BufferSink()
    assert device.start_shell("screencap -p", sink, via="test").done.wait(5)
    return bytes(sink.data)


def test_dump_to_a_file_prints_the_confirmation_and_cat_reads_it(device):
    run(device, f"am start -n {SETTINGS}")
    assert run(device, "uiautomator dump") == DUMPED + "/sdcard/window_dump.xml\n"
    assert run(device, "uiautomator dump --compressed /data/local/tmp/ui.xml") == DUMPED + "/data/local/tmp/ui.xml\n"
    xml = run(device, "cat /data/local/tmp/ui.xml")
    assert xml.startswith("<?xml version='1.0' encoding='UTF-8' standalone='yes' ?><hierarchy rotation=\"0\">")
    assert xml == run(device, "cat /sdcard/window_dump.xml")
    assert "\n" not in xml  # one line, like the real tool
    root = ElementTree.fromstring(xml)
    assert root.tag == "hierarchy"
    assert {node.get("package") for node in root.iter("node")} == {"com.android.settings"}
    assert texts(root)[:3] == ["Settings", "Network & internet", "Connected devices"]
    row = next(node for node in root.iter("node") if node.get("clickable") == "true")
    assert row.get("bounds") == "[0,200][1080,400]"
    assert row[0].get("resource-id") == "android:id/title"
    assert "Usage: uiautomator" in run(device, "uiautomator events")


def test_the_dump_follows_the_foreground_and_the_typed_text(device):
    assert "Settings" in texts(dump(device))  # the home screen lists the apps
    run(device, "am start -n com.example.app/.MainActivity")
    field = next(node for node in dump(device).iter("node") if node.get("class") == "android.widget.EditText")
    assert (field.get("resource-id"), field.get("text")) == ("com.example.app:id/username", "Username")
    run(device, "input text hello")
    field = next(node for node in dump(device).iter("node") if node.get("class") == "android.widget.EditText")
    assert field.get("text") == "hello"


def test_a_tap_on_a_row_opens_its_page_and_back_returns(device):
    run(device, f"am start -n {SETTINGS}")
    before_dump, before_png = dump(device), screenshot(device)
    x, y = centre(before_dump, "Network & internet")
    run(device, f"input tap {x} {y}")
    assert device.foreground == NETWORK
    after_dump, after_png = dump(device), screenshot(device)
    assert texts(after_dump)[:2] == ["Network & internet", "Internet"]
    assert after_png != before_png
    run(device, "input keyevent KEYCODE_BACK")
    assert device.foreground == SETTINGS
    assert screenshot(device) == before_png
    run(device, "input keyevent 4")
    assert device.foreground == "com.android.launcher3/.Launcher"


def test_taps_elsewhere_change_nothing_and_home_clears_the_back_stack(device):
    run(device, f"am start -n {SETTINGS}")
    run(device, "input tap 540 2000")  # below the last row
    run(device, "input tap 540 100")  # the title bar
    assert device.foreground == SETTINGS
    run(device, f"input tap {' '.join(map(str, centre(dump(device), 'Display')))}")
    assert device.foreground == "com.android.settings/.Settings$DisplaySettingsActivity"
    run(device, "input keyevent HOME")
    run(device, "input keyevent BACK")
    assert device.foreground == "com.android.launcher3/.Launcher"


def test_the_home_screen_launches_an_app_by_tap(device):
    x, y = centre(dump(device), "Example")
    run(device, f"input tap {x} {y}")
    assert device.foreground == "com.example.app/.MainActivity"
    run(device, f"input tap {' '.join(map(str, centre(dump(device), 'Details')))}")
    assert device.foreground == "com.example.app/.DetailActivity"


def test_screenshots_are_a_function_of_the_screen_state(device):
    other = SimDevice(SimDeviceSpec(serial="unit-2"))
    home = screenshot(device)
    assert png_size(home) == (1080, 2400)
    assert screenshot(other) == home  # same state, same bytes
    run(device, f"am start -n {EXAMPLE}")
    example = screenshot(device)
    run(device, "input text abc")  # into the focused field, which draws it
    typed = screenshot(device)
    run(other, f"am start -n {EXAMPLE}")
    run(other, "input text abd")
    assert len({home, example, typed, screenshot(other)}) == 4
    run(other, "am force-stop com.example.app")
    run(other, "pm clear com.example.app")
    run(other, f"am start -n {EXAMPLE}")
    assert screenshot(other) == example


def test_logcat_records_launches_and_input_in_threadtime(device):
    run(device, f"am start -n {SETTINGS}")
    run(device, "input tap 540 300")
    run(device, "am start -n com.android.settings/.Settings")  # already running: no new process
    lines = run(device, "logcat -d").splitlines()
    assert lines[0] == "--------- beginning of system"
    entries = [line for line in lines if not line.startswith("---------")]
    assert all(THREADTIME.match(line) for line in entries), entries
    starts = [line for line in entries if " I ActivityManager: Start proc " in line]
    assert len(starts) == 1
    assert re.search(
        r"Start proc (\d+):com\.android\.settings/u0a\d+ "
        r"for activity \{com\.android\.settings/\.Settings\}",
        starts[0],
    )
    assert any("I Input   : injectInputEvent: tap 540 300" in line for line in entries)
    assert any(f"START u0 {{cmp={NETWORK}}}" in line for line in entries)


def test_logcat_tail_formats_buffers_and_clear(device):
    for key in range(5):
        run(device, f"input keyevent {key + 7}")
    tail = run(device, "logcat -d -v threadtime -t 2").splitlines()
    assert tail[0] == "--------- beginning of main"
    assert [line.split(" I Input   : ", 1)[1] for line in tail[1:]] == [
        "injectInputEvent: keyevent 10",
        "injectInputEvent: keyevent 11",
    ]
    assert run(device, "logcat -t 1 -v brief").splitlines()[1].startswith("I/Input   (")
    assert run(device, "logcat -d -b system -v raw").splitlines() == [
        "--------- beginning of system",
        "System now ready",
    ]
    assert "Unknown format" in run(device, "logcat -d -v fancy")
    assert "only a positive line count" in run(device, "logcat -t soon")
    run(device, "logcat -c")
    assert run(device, "logcat -d") == ""


def test_logcat_without_d_follows_until_stopped(device):
    sink = BufferSink()
    follower = device.start_shell("logcat -v tag", sink, via="test")
    run(device, "input keyevent 3")
    eventually(lambda: b"I/Input   : injectInputEvent: keyevent 3\n" in sink.data, timeout=3)
    assert not follower.done.is_set()
    follower.hangup()
    assert follower.done.wait(2)


@pytest.mark.parametrize("path", ["/sdcard/window_dump.xml", "/data/local/tmp/amc-ui.xml"])
def test_a_dump_file_can_be_pulled_over_sync(sim, tmp_path, path):
    device = Client("127.0.0.1", sim.server_port).device("amc-sim-01")
    device.shell("am start -n com.android.settings/.Settings")
    assert device.shell(f"uiautomator dump {path}") == DUMPED + path + "\n"
    local = tmp_path / "ui.xml"
    device.pull(path, str(local))
    assert "Network & internet" in texts(ElementTree.parse(local).getroot())
