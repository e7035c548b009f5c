"""The command strings the executor builds, checked by running them on a simulated shell."""

from __future__ import annotations

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
