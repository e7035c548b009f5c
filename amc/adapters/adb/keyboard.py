"""Typing: `text` (ASCII at the focused field, as before) and `type` (into a target, optionally
replacing what the field holds, in any script where the device allows it).

`input text` can type only printable ASCII (specs/adb.md §6). Other text goes through the ADB
keyboard, a broadcast IME (`commands.ADB_KEYBOARD`), and only when it is the device's
current input method: otherwise the step fails naming what is missing, and nothing is typed.

`clear` empties the field first, in the same shell command as the typing, so nothing can
come between: with the IME by its clear broadcast, else by moving to the field's end and
deleting as many characters as the field holds (read from the fresh dump).
"""

from __future__ import annotations

from typing import Any

from amc.core.ui.tree import Element, Screen

from . import commands as build
from .calls import ActionResult, Call, as_json, flag, required
from .errors import StepFailed
from .screen import dump, locate, selector


def text(call: Call, args: dict[str, Any]) -> ActionResult:
    call.set_deadline(call.limits.command_timeout)
    payloads = build.text(required(args, "text", str))
    return call.result("text", output="".join(call.fixed(payload) for payload in payloads))


def type_text(call: Call, args: dict[str, Any]) -> ActionResult:
    value = required(args, "text", str)
    clear = flag(args, "clear", False)
    if not value and not clear:
        raise StepFailed("text may be empty only with clear: true")
    call.set_deadline(call.limits.command_timeout)
    through_ime = not build.printable_ascii(value)
    if through_ime:
        ime_missing(call)  # before anything is tapped or cleared
    field: Element | None = None
    output: dict[str, Any] = {}
    if "target" in args:
        found, _ = locate(call, selector(args))
        field = found.element
        call.fixed(build.tap(*found.point))
        output = {"element": field.to_json(), "point": list(found.point)}
    elif clear and not through_ime:
        field = focused(dump(call).screen)
    payloads = []
    if clear:
        payloads.append(build.ime_clear() if through_ime else build.clear_by_keys(_length(field)))
    if value:
        payloads += [build.ime_text(value)] if through_ime else build.text(value)
    call.fixed(" && ".join(payloads))
    return call.result("type", output=as_json(output) if output else "")


def ime_missing(call: Call) -> None:
    """Fail unless the ADB keyboard is the current input method."""
    current = call.fixed(build.INPUT_METHOD).strip()
    if current != build.ADB_KEYBOARD:
        raise StepFailed(
            f"typing non-ASCII text needs the ADB keyboard ({build.ADB_KEYBOARD}) as the input method; "
            f"the device's is {current or 'not set'}"
        )


def focused(screen: Screen) -> Element:
    """The focused text field, which `clear` without a target empties."""
    field = next((node for node in screen.nodes if node.focused and node.editable), None)
    if field is None:
        raise StepFailed("clear without a target needs a focused text field, and none is focused; give a target")
    return field


def _length(field: Element | None) -> int:
    return len(field.text) if field is not None else 0
