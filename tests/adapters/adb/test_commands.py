"""The command strings the executor builds, checked by running them on a simulated shell."""

from __future__ import annotations

import base64
import shlex
import string

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from amc.adapters.adb import commands
from amc.adapters.adb.errors import StepFailed
from amc.sim.device import SimDevice
from amc.sim.spec import SimDeviceSpec


class Sink:
    def __init__(self):
        self.data = bytearray()

    def write(self, data):
        self.data += data

    def close(self):
        pass


def typed_on_device(text: str) -> str:
    device = SimDevice(SimDeviceSpec(serial="quoting"))
    for command in commands.text(text):
        sink = Sink()
        assert device.start_shell(command, sink, via="test").done.wait(5)
        assert sink.data == b"", sink.data
    return device.typed_text


TRICKY = [
    'it\'s "fine" & $HOME; (ok)',
    "two  spaces and a trailing one ",
    "100% sure, %s literal, %%s too",
    "`id` $(id) ${HOME} \\n \\ | > < * ? ~ # !",
    "'",
    '"',
    "%",
    "%s",
    " ",
]


@pytest.mark.parametrize("text", TRICKY)
def test_text_is_typed_exactly(text):
    assert typed_on_device(text) == text


@settings(max_examples=150, deadline=None)
@given(st.text(alphabet=st.sampled_from(string.printable[:95]), max_size=40))
def test_any_printable_ascii_is_typed_exactly(text):
    assert typed_on_device(text) == text


def test_text_is_one_shell_word_with_spaces_as_percent_s():
    assert commands.text('it\'s "fine" & $HOME; (ok)') == ["input text 'it'\"'\"'s%s\"fine\"%s&%s$HOME;%s(ok)'"]
    assert commands.text("a%sb") == ["input text a%", "input text sb"]
    assert commands.text("") == []


def test_text_refuses_what_the_virtual_keyboard_cannot_type():
    with pytest.raises(StepFailed, match="printable ASCII"):
        commands.text("café")
    with pytest.raises(StepFailed, match="printable ASCII"):
        commands.text("line\nbreak")


def test_fixed_commands():
    assert commands.tap(540, 1200) == "input tap 540 1200"
    assert commands.swipe(1, 2, 3, 4) == "input swipe 1 2 3 4"
    assert commands.swipe(1, 2, 3, 4, duration_ms=800) == "input swipe 1 2 3 4 800"
    assert commands.keyevent(3) == "input keyevent 3"
    assert commands.keyevent("home") == "input keyevent KEYCODE_HOME"
    assert commands.keyevent("KEYCODE_BACK") == "input keyevent KEYCODE_BACK"
    assert commands.launch("com.example.app") == "monkey -p com.example.app -c android.intent.category.LAUNCHER 1"
    assert commands.launch("com.example.app", ".MainActivity") == "am start -n com.example.app/.MainActivity"
    assert (
        commands.launch("com.example.app", "com.example.app.Outer$Inner")
        == "am start -n 'com.example.app/com.example.app.Outer$Inner'"
    )


@pytest.mark.parametrize(
    "build",
    [
        lambda: commands.tap(-1, 2),
        lambda: commands.tap("1; reboot", 2),
        lambda: commands.tap(True, 2),
        lambda: commands.keyevent("HOME; reboot"),
        lambda: commands.launch("com.x; reboot"),
        lambda: commands.launch("com.example.app", ".Main; reboot"),
    ],
)
def test_injection_through_arguments_is_refused(build):
    with pytest.raises(StepFailed):
        build()


def test_supervised_command_and_exit_marker():
    payload = commands.supervised("echo 'hi there'; exit 3", "abc123")
    assert payload == "sh -c 'echo '\"'\"'hi there'\"'\"'; exit 3' amc-step-abc123; echo amc-exit-abc123:$?"
    assert commands.split_exit_marker(b"hi there\namc-exit-abc123:3\n", "abc123") == (b"hi there\n", 3)
    assert commands.split_exit_marker(b"no newlineamc-exit-abc123:0\n", "abc123") == (b"no newline", 0)
    assert commands.split_exit_marker(b"cut off mid-", "abc123") == (b"cut off mid-", None)
    assert commands.split_exit_marker(b"amc-exit-other:0\n", "abc123")[1] is None
    assert commands.kill_supervised("abc123") == "pkill -f 'amc-ste[p]-abc123'"


# --- the on-screen actions (protocol v1.2) ----------------------------------------------


def run_on_device(device: SimDevice, command: str) -> bytes:
    sink = Sink()
    assert device.start_shell(command, sink, via="test").done.wait(5)
    return bytes(sink.data)


@pytest.mark.req("UI/s6")
def test_gesture_and_key_payloads():
    assert commands.double_tap(10, 20) == "input tap 10 20; input tap 10 20"
    assert commands.long_press(10, 20, 1000) == "input swipe 10 20 10 20 1000"
    assert commands.keyevents(commands.KEYCODES["back"]) == "input keyevent KEYCODE_BACK"
    assert commands.clear_by_keys(3) == "input keyevent KEYCODE_MOVE_END KEYCODE_DEL KEYCODE_DEL KEYCODE_DEL"
    assert commands.clear_by_keys(0) == "input keyevent KEYCODE_MOVE_END"


@pytest.mark.req("UI/s7")
@settings(max_examples=100, deadline=None)
@given(st.text(max_size=60))
def test_any_text_survives_the_ime_broadcast_as_base64(text):
    payload = commands.ime_text(text)
    prefix = "am broadcast -a ADB_INPUT_B64 --es msg "
    assert payload.startswith(prefix)
    encoded = payload[len(prefix) :]
    assert shlex.split(encoded) == [encoded] or encoded == "", "one shell word, nothing to quote"
    assert base64.b64decode(encoded).decode("utf-8") == text
    assert commands.ime_clear() == "am broadcast -a ADB_CLEAR_TEXT"


def test_printable_ascii_is_what_input_text_types():
    assert commands.printable_ascii("Log in ~!") and commands.printable_ascii("")
    assert not commands.printable_ascii("café") and not commands.printable_ascii("a\tb")


@pytest.mark.req("UI/s10")
def test_app_and_device_payloads():
    assert commands.stop_app("com.example.app") == "am force-stop com.example.app"
    assert commands.clear_app_data("com.example.app") == "pm clear com.example.app"
    assert commands.open_url("market://details?id=a&b=c") == (
        "am start -a android.intent.action.VIEW -d 'market://details?id=a&b=c'"
    )
    assert commands.set_orientation("landscape") == (
        "settings put system accelerometer_rotation 0 && settings put system user_rotation 1"
    )
    assert commands.list_packages(third_party=True) == "pm list packages -3"
    assert commands.parse_packages("package:b\npackage:a\nnoise\npackage:a\n") == ["a", "b"]
    assert commands.ui_dump("/data/local/tmp/x.xml") == (
        "uiautomator dump /data/local/tmp/x.xml && cat /data/local/tmp/x.xml && rm -f /data/local/tmp/x.xml"
    )


def test_a_url_reaches_the_device_as_one_argument():
    device = SimDevice(SimDeviceSpec(serial="urls"))
    url = "https://example.com/a?x=$HOME&y='1';reboot"
    said = run_on_device(device, commands.open_url(url)).decode()
    assert said == f"Starting: Intent {{ act=android.intent.action.VIEW dat={url} }}\n"


@pytest.mark.parametrize(
    "build",
    [
        lambda: commands.stop_app("com.x; reboot"),
        lambda: commands.clear_app_data(""),
        lambda: commands.open_url("no scheme"),
        lambda: commands.open_url("https://" + "a" * 8192),
        lambda: commands.set_orientation("upside-down"),
    ],
)
def test_bad_app_arguments_are_refused(build):
    with pytest.raises(StepFailed):
        build()
