"""`input`: taps, swipes, key events and text, as Input.java takes them; what each does to
the screen is `gestures`' business.

`input swipe` takes its duration (300 ms when none is given, as Input.java does) before
its effect shows, so a long press costs its time as on a phone. `input keyevent` takes
several keys (names with or without KEYCODE_, or numbers) and sends them in order.
"""

from __future__ import annotations

import re

from .. import gestures
from ..invocation import Invocation

DEFAULT_SWIPE_MS = 300

# A small part of KeyEvent's table (ppadb keycode.py): enough for agents' keys.
KEYCODES = {
    "HOME": 3,
    "BACK": 4,
    "CALL": 5,
    "ENDCALL": 6,
    "DPAD_UP": 19,
    "DPAD_DOWN": 20,
    "DPAD_LEFT": 21,
    "DPAD_RIGHT": 22,
    "DPAD_CENTER": 23,
    "VOLUME_UP": 24,
    "VOLUME_DOWN": 25,
    "POWER": 26,
    "CAMERA": 27,
    "TAB": 61,
    "SPACE": 62,
    "ENTER": 66,
    "DEL": 67,
    "MENU": 82,
    "SEARCH": 84,
    "MEDIA_PLAY_PAUSE": 85,
    "ESCAPE": 111,
    "FORWARD_DEL": 112,
    "MOVE_HOME": 122,
    "MOVE_END": 123,
    "APP_SWITCH": 187,
    "SLEEP": 223,
    "WAKEUP": 224,
    **{str(digit): 7 + digit for digit in range(10)},
    **{chr(ord("A") + index): 29 + index for index in range(26)},
}
_INPUT_SOURCES = {
    "touchscreen",
    "touchpad",
    "keyboard",
    "mouse",
    "trackball",
    "stylus",
    "dpad",
    "gamepad",
    "joystick",
    "touchnavigation",
}
_NUMBER = re.compile(r"^-?\d+(\.\d+)?$")


def decode_input_text(text: str) -> str:
    """What `input text` types: Input.java turns each `%s` into a space, scanning left to right."""
    typed = []
    i = 0
    while i < len(text):
        if text[i] == "%" and i + 1 < len(text) and text[i + 1] == "s":
            typed.append(" ")
            i += 2
        else:
            typed.append(text[i])
            i += 1
    return "".join(typed)


def _usage(inv: Invocation, message: str) -> int:
    inv.err(f"Error: {message}\n")
    inv.err("Usage: input [<source>] <command> [<arg>...]\n")
    return 1


def input_(inv: Invocation) -> int:
    args = list(inv.args)
    if args and args[0] in _INPUT_SOURCES:
        args.pop(0)
    if not args:
        return _usage(inv, "missing command")
    command, rest = args[0], args[1:]
    device = inv.device
    if command in ("tap", "swipe"):
        wanted = (2,) if command == "tap" else (4, 5)
        if len(rest) not in wanted or not all(_NUMBER.match(value) for value in rest):
            return _usage(inv, f"Invalid arguments for command: {command}")
        _event(inv, " ".join([command, *rest]))
        point = [round(float(value)) for value in rest]
        if command == "tap":
            gestures.tap(device, point[0], point[1])
        else:
            milliseconds = point[4] if len(point) == 5 else DEFAULT_SWIPE_MS
            inv.process.sleep(max(0, milliseconds) / 1000)
            gestures.swipe(device, point[0], point[1], point[2], point[3], max(0, milliseconds) / 1000)
    elif command == "text":
        # Input.java takes exactly one argument: unquoted spaces are a caller's bug.
        if len(rest) != 1:
            return _usage(inv, "Invalid arguments for command: text")
        typed = decode_input_text(rest[0])
        if any(not (" " <= char <= "~") for char in typed):
            inv.err("Error: the virtual keyboard cannot type non-ASCII or control characters\n")
            return 1
        _event(inv, f"text {typed}")
        gestures.type_text(device, typed)
    elif command == "keyevent":
        keys = [key for key in rest if not key.startswith("--")]
        if not keys:
            return _usage(inv, "Invalid arguments for command: keyevent")
        for key in keys:
            name = key[len("KEYCODE_") :] if key.startswith("KEYCODE_") else key
            if not key.isdigit() and name not in KEYCODES:
                inv.err(f"Error: unknown keycode '{key}'\n")
                return 1
            code = int(key) if key.isdigit() else KEYCODES[name]
            _event(inv, f"keyevent {code}" + (" longpress" if "--longpress" in rest else ""))
            gestures.key(device, code)
    elif command in ("press", "roll"):
        _event(inv, " ".join([command, *rest]))
    else:
        return _usage(inv, f"Unknown command: {command}")
    return 0


def _event(inv: Invocation, event: str) -> None:
    """Record an injected input event, in the device's event list and in its log."""
    inv.device.input_events.append(event)
    inv.device.logcat.log("I", "Input", f"injectInputEvent: {event}", pid=inv.process.pid)


PROGRAMS = {"input": input_}
