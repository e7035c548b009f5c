"""The observation actions `ui_dump` and `logcat` through ppadb against the simulator."""

from __future__ import annotations

import re
import threading
import time
import xml.etree.ElementTree as ElementTree

import pytest

from amc.adapters.adb.errors import Interrupted, StepFailed
from amc.sim import programs

from .helpers import SERIAL, eventually

req = pytest.mark.req

SUPERVISED = re.compile(r"^sh -c '(?P<command>.*)' amc-step-(?P<token>[0-9a-f]+); echo amc-exit-(?P=token):\$\?$")


def inner_commands(sim, serial=SERIAL) -> list[str]:
    """The commands the executor supervised, without their wrapper."""
    return [SUPERVISED.match(command).group("command") for command in sim.commands(serial) if SUPERVISED.match(command)]


def texts(path) -> list[str]:
    return [node.get("text") for node in ElementTree.parse(path).getroot().iter("node") if node.get("text")]


@req("UI/s9")
def test_ui_dump_returns_the_settled_hierarchy_as_an_xml_artifact(executor, sim, tmp_path):
    executor.run("launch", {"package": "com.android.settings"})
    result = executor.run("ui_dump", {}, step_id="ui/1")
    assert (result.action, result.content_type, result.output) == ("ui_dump", "application/xml", "")
    assert result.artifact.parent == tmp_path / "artifacts"
    assert result.artifact.name.startswith("amc-sim-01-ui_1-") and result.artifact.suffix == ".xml"
    assert ElementTree.parse(result.artifact).getroot().tag == "hierarchy"
    assert texts(result.artifact)[:2] == ["Settings", "Network & internet"]
    dumps = inner_commands(sim)
    assert len(dumps) == 2, "it settles: two dumps in a row agree"
    for dump in dumps:  # each one round trip: dump to a fresh file, print it, remove it
        path = re.fullmatch(r"uiautomator dump (/data/local/tmp/amc-ui-[0-9a-f]+\.xml) && cat \1 && rm -f \1", dump)
        assert path is not None, dump
        assert path.group(1) not in sim.device(SERIAL).files, "the device file is removed once read"
    assert result.commands[-2:] == tuple(sim.commands(SERIAL)[-2:])


@req("UI/s9")
def test_ui_dump_without_settle_dumps_once(executor, sim):
    executor.run("ui_dump", {"settle": False})
    assert len(inner_commands(sim)) == 1


def test_ui_dumps_follow_a_tap_that_opens_a_page(executor):
    executor.run("launch", {"package": "com.android.settings"})
    before = executor.run("ui_dump", {}).artifact
    row = next(
        node for node in ElementTree.parse(before).getroot().iter("node") if node.get("text") == "Network & internet"
    )
    x1, y1, x2, y2 = map(int, re.findall(r"\d+", row.get("bounds")))
    executor.run("tap", {"x": (x1 + x2) // 2, "y": (y1 + y2) // 2})
    after = executor.run("ui_dump", {}).artifact
    assert texts(after)[:2] == ["Network & internet", "Internet"]
    assert after.read_bytes() != before.read_bytes()


def test_a_dump_the_tool_did_not_confirm_fails(executor, monkeypatch):
    def idle_error(inv):
        inv.out("ERROR: could not get idle state.\n")
        return 0

    monkeypatch.setitem(programs.REGISTRY, "uiautomator", idle_error)
    with pytest.raises(StepFailed, match="could not get idle state") as caught:
        executor.run("ui_dump", {})
    assert caught.value.output.startswith("ERROR: could not get idle state.\n")
    assert len(caught.value.commands) == 1


def test_a_dump_that_is_not_a_hierarchy_fails(executor, monkeypatch):
    def half_written(inv):
        inv.device.files[inv.args[1]] = b"<?xml version='1.0' ?><hierarchy><node"
        inv.out(f"UI hierchary dumped to: {inv.args[1]}\n")
        return 0

    monkeypatch.setitem(programs.REGISTRY, "uiautomator", half_written)
    with pytest.raises(StepFailed, match="not well-formed XML"):
        executor.run("ui_dump", {})


def test_an_interrupted_dump_is_stopped_on_the_device(executor, sim, monkeypatch):
    def slow(inv):
        inv.process.sleep(30)
        return 0

    monkeypatch.setitem(programs.REGISTRY, "uiautomator", slow)
    threading.Timer(0.3, executor.interrupt).start()
    started = time.monotonic()
    with pytest.raises(Interrupted, match="ui dump"):
        executor.run("ui_dump", {})
    assert time.monotonic() - started < 2
    eventually(lambda: not sim.device(SERIAL).processes())


def test_logcat_returns_the_last_lines_as_a_text_artifact(executor, sim):
    executor.run("launch", {"package": "com.android.settings"})
    result = executor.run("logcat", {}, step_id="log")
    assert (result.action, result.content_type) == ("logcat", "text/plain; charset=utf-8")
    assert result.artifact.suffix == ".txt"
    log = result.artifact.read_text()
    assert re.search(r" I ActivityManager: Start proc \d+:com\.android\.settings/", log)
    assert inner_commands(sim)[-1] == "logcat -d -v threadtime -t 200"
    for _ in range(5):
        executor.run("keyevent", {"key": "BACK"})
    tail = executor.run("logcat", {"lines": 3}).artifact.read_text().splitlines()
    assert inner_commands(sim)[-1] == "logcat -d -v threadtime -t 3"
    entries = [line for line in tail if not line.startswith("--------- beginning of")]
    assert len(entries) == 3 and all(line.endswith("injectInputEvent: keyevent 4") for line in entries)


@pytest.mark.parametrize("lines", [0, -1, 10_001, 2.5, True, "200"])
def test_bad_logcat_lines_fail_before_anything_is_sent(executor, sim, lines):
    with pytest.raises(StepFailed, match="lines"):
        executor.run("logcat", {"lines": lines})
    assert sim.log(SERIAL) == []


def test_a_failing_logcat_is_a_failed_step(executor, monkeypatch):
    def broken(inv):
        inv.err("logcat: failed to read from log buffers\n")
        return 1

    monkeypatch.setitem(programs.REGISTRY, "logcat", broken)
    with pytest.raises(StepFailed, match="logcat exited with status 1") as caught:
        executor.run("logcat", {})
    assert "failed to read" in caught.value.output
