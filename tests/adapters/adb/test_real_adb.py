"""Through the real Debian `adb` server: `adb connect` to the simulated adbd, then ppadb.

Skipped with a reason when `adb` is not on PATH; with AMC_REQUIRE_ADB=1 they fail instead.
"""

from __future__ import annotations

import json
import re
import threading
import time
import xml.etree.ElementTree as ElementTree

import pytest
from PIL import Image

from amc.adapters.adb.discovery import discover
from amc.adapters.adb.errors import Interrupted, StepTimedOut
from amc.adapters.adb.executor import AdbExecutor
from amc.sim.png import png_size

from .helpers import eventually

SLACK = 0.5
req = pytest.mark.req


def test_happy_path(real_adb, sim, tmp_path):
    serial = real_adb.connect(sim.device_ports["amc-sim-01"])
    client = real_adb.client()
    attributes = {info.serial: info.attributes for info in discover(client)}
    assert attributes[serial] == {"model": "Pixel 7", "manufacturer": "Google", "sdk": "34", "screen_size": "1080x2400"}
    executor = AdbExecutor(client, serial, artifacts_dir=tmp_path)
    assert executor.run("shell", {"command": "getprop ro.product.model"}).output == "Pixel 7\n"
    executor.run("tap", {"x": 540, "y": 1200})
    executor.run("text", {"text": 'it\'s "fine" & $HOME; (ok)'})
    shot = executor.run("screenshot", {"settle": False}, step_id="real")
    assert png_size(shot.artifact.read_bytes()) == (1080, 2400)
    device = sim.device("amc-sim-01")
    assert device.input_events[0] == "tap 540 1200"
    assert device.typed_text == 'it\'s "fine" & $HOME; (ok)'
    records = [r for r in sim.log("amc-sim-01") if r.service == "shell"]
    assert {r.via for r in records} == {"adbd"}
    commands = [r.command for r in records]
    assert commands[:2] == ["getprop", "wm size"]  # discovery
    assert commands[2].startswith("sh -c 'getprop ro.product.model' amc-step-")
    assert commands[3:5] == [
        "input tap 540 1200",
        "input text 'it'\"'\"'s%s\"fine\"%s&%s$HOME;%s(ok)'",
    ]
    assert commands[6] == "screencap", "the raw frame, over exec:"
    assert "uiautomator dump" in commands[5] and "uiautomator dump" in commands[7]
    # The adb CLI itself uses the legacy shell, as the device advertises no shell_v2.
    assert real_adb.run("-s", serial, "shell", "echo", "from cli").stdout == "from cli\n"


def test_interrupting_a_long_command(real_adb, sim, tmp_path):
    """A realistic raw-shell device: closing the stream leaves `sleep` running until pkill."""
    serial = real_adb.connect(sim.device_ports["amc-sim-raw"])
    executor = AdbExecutor(real_adb.client(), serial, artifacts_dir=tmp_path)
    threading.Timer(0.4, executor.interrupt).start()
    started = time.monotonic()
    with pytest.raises(Interrupted, match="stopped on the device"):
        executor.run("shell", {"command": "sleep 30"})
    assert time.monotonic() - started < 0.4 + SLACK

    def sleep_record():
        return [(r.end, r.signal) for r in sim.log("amc-sim-raw") if "sleep 30" in r.command and r.end != "running"]

    assert eventually(sleep_record) == [("killed", "SIGTERM")]
    assert sim.device("amc-sim-raw").processes() == []


def test_deadline_on_a_chatty_command(real_adb, sim, tmp_path):
    serial = real_adb.connect(sim.device_ports["amc-sim-01"])
    executor = AdbExecutor(real_adb.client(), serial, artifacts_dir=tmp_path)
    started = time.monotonic()
    with pytest.raises(StepTimedOut) as caught:
        executor.run("shell", {"command": "amc-sim-ticker 30", "timeout_seconds": 0.7})
    assert 0.7 <= time.monotonic() - started < 0.7 + SLACK
    assert caught.value.output.startswith("tick 1\n")

    def ticker_record():
        return [(r.end, r.signal) for r in sim.log("amc-sim-01") if "ticker" in r.command and r.end != "running"]

    # The stream's close (SIGHUP, or SIGPIPE on its next write) or the executor's follow-up
    # pkill (SIGTERM) stops it first.
    assert eventually(ticker_record)[0] in {
        ("interrupted", "SIGHUP"),
        ("interrupted", "SIGPIPE"),
        ("killed", "SIGTERM"),
    }


def test_observations_through_the_real_server(real_adb, sim, tmp_path):
    """ui_dump and logcat through the real server: the XML parses and follows a tap; the log
    shows the launch."""
    serial = real_adb.connect(sim.device_ports["amc-sim-01"])
    executor = AdbExecutor(real_adb.client(), serial, artifacts_dir=tmp_path)
    executor.run("launch", {"package": "com.android.settings"})
    root = ElementTree.parse(executor.run("ui_dump", {}, step_id="ui").artifact).getroot()
    row = next(node for node in root.iter("node") if node.get("text") == "Network & internet")
    x1, y1, x2, y2 = map(int, re.findall(r"\d+", row.get("bounds")))
    executor.run("tap", {"x": (x1 + x2) // 2, "y": (y1 + y2) // 2})
    after = ElementTree.parse(executor.run("ui_dump", {}).artifact).getroot()
    assert [node.get("text") for node in after.iter("node") if node.get("text")][:2] == [
        "Network & internet",
        "Internet",
    ]
    log = executor.run("logcat", {"lines": 50}).artifact.read_text()
    assert re.search(r" I ActivityManager: Start proc \d+:com\.android\.settings/", log)
    assert "injectInputEvent: tap" in log
    assert {r.via for r in sim.log("amc-sim-01") if r.service == "shell"} == {"adbd"}


@req("UI/s5", "UI/s6", "UI/s7", "UI/s11", "UI/s12")
def test_element_actions_and_observations_through_the_real_server(real_adb, sim, tmp_path):
    """Raw frames and dumps cross the real server intact; a selector tap, typing and an index."""
    serial = real_adb.connect(sim.device_ports["amc-sim-01"])
    executor = AdbExecutor(real_adb.client(), serial, artifacts_dir=tmp_path)
    executor.run("launch", {"package": "com.example.app"})
    shot = executor.run("screenshot", {"scale": 0.5, "marks": True, "format": "jpeg"})
    assert shot.content_type == "image/jpeg"
    assert Image.open(shot.artifact).size == (540, 1200)
    elements = json.loads(shot.output)["elements"]
    field = next(element for element in elements if element["editable"])
    typed = json.loads(executor.run("type", {"text": "ada", "target": {"index": field["index"]}}).output)
    assert typed["element"]["index"] == field["index"]
    assert sim.device("amc-sim-01").typed_text == "ada"
    tapped = json.loads(executor.run("tap", {"target": {"text": "Log in"}}).output)
    assert tapped["element"]["text"] == "Log in"
    found = json.loads(executor.run("wait_for", {"target": {"text_contains": "signed in as"}}).output)
    assert found["element"]["text"] == "Signed in as ada"
    tree = json.loads(executor.run("ui_tree", {"diff": True}).output)
    assert "Welcome" in [element["text"] for element in tree["elements"]]
