"""The action table: every action a plan step, a session action or an MCP tool may name, with
the arguments it takes (specs/protocol.md, Plan; protocol v1.2).

An action is called in one of a few *forms*. A form names the arguments that select it
(all required) and those it may add. ``tap`` has two: ``x`` and ``y``, or ``target``; ``swipe``
has two: ``x1, y1, x2, y2``, or ``direction`` (with an optional ``target``). Most actions have
exactly one. Arguments of two forms together (``target`` with ``x``) fit no form, and the
refusal names the stray argument and the forms the action takes. So the cross-member rules
(target XOR point, points XOR direction) are the table's shape, not code.

What is left after the forms is one argument at a time: a value check says what the value
must be, and a ``target`` is a selector (`amc.core.ui.target`) whose action may or may not
take ``target.index``. The one rule across values is `type`'s (an empty text only clears),
declared with the action.

Every refusal is one sentence naming the argument, so a 400's ``detail`` (prefixed with the
step: ``step 'login': argument 'target' of tap: target is empty; ...``) and an MCP tool's
error read the same. Defaults are the executor's; the table only accepts or refuses.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

import attrs

from amc.core.inputs import input_argument
from amc.core.ui.target import KEYS, SelectorError, parse_target

MAX_KEY_NAME = 128
MAX_STRING = 65_536
MAX_SECONDS = 86_400.0
MAX_WAIT_SECONDS = 600.0  # wait_for, wait_for_idle: a wait on the screen, not a sleep
MAX_LOGCAT_LINES = 10_000  # the ADB executor's own bound too (amc.adapters.adb.commands)
MAX_URL = 8_192
MAX_PACKAGE = 256

DIRECTIONS = ("up", "down", "left", "right")
ORIENTATIONS = ("portrait", "landscape")
IMAGE_FORMATS = ("png", "jpeg", "webp")
RECORD_MODES = ("start", "stop")  # issue 26, screen recording

# A value check returns None when the value is fine, else what it must be ("an integer in 0..9").
Check = Callable[[Any], str | None]


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _string(value: Any) -> str | None:
    if not isinstance(value, str) or not value or len(value) > MAX_STRING:
        return f"a non-empty string of at most {MAX_STRING} characters"
    return None


def _any_string(value: Any) -> str | None:
    if not isinstance(value, str) or len(value) > MAX_STRING:
        return f"a string of at most {MAX_STRING} characters"
    return None


def _boolean(value: Any) -> str | None:
    return None if isinstance(value, bool) else "true or false"


def _integer(low: int, high: int, what: str) -> Check:
    def check(value: Any) -> str | None:
        return None if _is_int(value) and low <= value <= high else f"an integer {what} in {low}..{high}"

    return check


def _one_of(choices: tuple[str, ...]) -> Check:
    def check(value: Any) -> str | None:
        return None if isinstance(value, str) and value in choices else f"one of {', '.join(choices)}"

    return check


def _seconds(value: Any) -> str | None:
    return None if _is_number(value) and 0 <= value <= MAX_SECONDS else f"a number of seconds in 0..{MAX_SECONDS:g}"


def _timeout(limit: float) -> Check:
    def check(value: Any) -> str | None:
        return None if _is_number(value) and 0 < value <= limit else f"a number of seconds in (0, {limit:g}]"

    return check


def _scale(value: Any) -> str | None:
    return None if _is_number(value) and 0.1 <= value <= 1 else "a number in 0.1..1 (1 is full size)"


def _key(value: Any) -> str | None:
    # `input keyevent` takes a key code name (KEYCODE_HOME) or its number (3).
    if (isinstance(value, str) and 0 < len(value) <= MAX_KEY_NAME) or (_is_int(value) and 0 <= value <= 10_000):
        return None
    return "a key code name (e.g. KEYCODE_HOME) or a key code number"


# An Android package name: dotted segments, the first starting with a letter (what the ADB
# executor accepts too). `launch` keeps v1.1's looser rule (any non-empty string) for
# compatibility; its Host Agent fails the step for a string that is not a package name.
_PACKAGE = re.compile(r"[A-Za-z][A-Za-z0-9_]*(\.[A-Za-z0-9_]+)+")


def _package(value: Any) -> str | None:
    if isinstance(value, str) and len(value) <= MAX_PACKAGE and _PACKAGE.fullmatch(value):
        return None
    return "a package name such as com.example.app"


# A scheme, a colon, then no whitespace or control character: what `am start -d` can carry.
_URL = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*:[^\x00-\x20\x7f]+")


def _url(value: Any) -> str | None:
    if isinstance(value, str) and len(value) <= MAX_URL and _URL.fullmatch(value):
        return None
    return f"a URL with a scheme (e.g. https://example.com/), without spaces, of at most {MAX_URL} characters"


# -- apps and files (install, uninstall, push, pull) ----------------------------------------
MAX_DEVICE_PATH = 4_096


def _device_path(value: Any) -> str | None:
    # A file on the device, absolute: push and pull go through the sync service, never a shell,
    # so any character but a control character may be in it.
    if (
        isinstance(value, str)
        and value.startswith("/")
        and not value.endswith("/")
        and len(value) <= MAX_DEVICE_PATH
        and not any(ord(c) < 0x20 or ord(c) == 0x7F for c in value)
    ):
        return None
    return f"an absolute file path on the device (e.g. /sdcard/Download/x.txt) of at most {MAX_DEVICE_PATH} characters"


# -------------------------------------------------------------------------------------------

_coordinate = _integer(0, 100_000, "pixel coordinate")
_duration_ms = _integer(0, 600_000, "number of milliseconds")
_press_ms = _integer(1, 60_000, "number of milliseconds")
_quiet_ms = _integer(0, 60_000, "number of milliseconds")
_lines = _integer(1, MAX_LOGCAT_LINES, "number of lines")
_max_swipes = _integer(1, 100, "number of swipes")
_quality = _integer(1, 100, "quality")
_direction = _one_of(DIRECTIONS)
_wait_timeout = _timeout(MAX_WAIT_SECONDS)


@attrs.frozen
class Target:
    """A ``target`` argument: a selector. `index` says whether the action may name an element
    of the attempt's last observation by its index; actions that look for an element on
    screens still to come (waits, assertions, scrolling until it shows) may not."""

    index: bool

    def complaint(self, action: str, value: Any) -> str | None:
        try:
            selector = parse_target(value)
        except SelectorError as error:
            return str(error)
        if selector.by_index and not self.index:
            by = ", ".join(key for key in KEYS if key != "index")
            return (
                f"target.index names an element of an earlier observation, and {action} looks at "
                f"the screens to come; select the element by one of {by}"
            )
        return None


TARGET = Target(index=True)
TARGET_NO_INDEX = Target(index=False)

Spec = Check | Target


@attrs.frozen
class Form:
    """One way to call an action: the arguments that select it (all required) and those it may add."""

    required: Mapping[str, Spec] = attrs.field(factory=dict)
    optional: Mapping[str, Spec] = attrs.field(factory=dict)

    @property
    def names(self) -> set[str]:
        return set(self.required) | set(self.optional)

    def describe(self) -> str:
        """How a refusal names the form: ``x and y``, ``x1, y1, x2 and y2``, ``target``."""
        return _and(list(self.required))


@attrs.frozen
class Action:
    """An action's forms, and at most one rule across its argument values."""

    forms: tuple[Form, ...]
    rule: Callable[[Mapping[str, Any]], str | None] | None = None

    def refusal(self, action: str, args: Mapping[str, Any]) -> str | None:
        """What is wrong with `args` for this action, as one sentence, or None."""
        unknown = sorted(set(args) - set().union(*(form.names for form in self.forms)))
        if unknown:
            return f"unknown argument {unknown[0]!r} for action {action}"
        given = set(args)
        fitting = [form for form in self.forms if given <= form.names]
        if not fitting:
            # Arguments of two forms: keep the form most of them belong to, name the stray one.
            best = max(self.forms, key=lambda form: len(given & form.names))
            stray = sorted(given - best.names)[0]
            kept = [name for name in best.required if name in given] or sorted(given & best.names)
            return (
                f"argument {stray!r} of {action} does not go with {_and([repr(name) for name in kept])}; "
                f"{action} takes {self.describe()}"
            )
        complete = [form for form in fitting if set(form.required) <= given]
        if not complete:
            if len(fitting) == 1:
                missing = next(name for name in fitting[0].required if name not in given)
                return f"action {action} requires argument {missing!r}"
            return f"action {action} requires {_or([form.describe() for form in fitting])}"
        form = complete[0]
        for name, spec in {**form.required, **form.optional}.items():
            if name in args and (complaint := _complaint(spec, action, args[name])) is not None:
                return f"argument {name!r} of {action}{complaint}"
        return self.rule(args) if self.rule is not None else None

    def describe(self) -> str:
        return _or([form.describe() for form in self.forms])


def _complaint(spec: Spec, action: str, value: Any) -> str | None:
    """What follows ``argument 'x' of tap`` in a refusal: ``must be ...`` or, for a selector,
    ``: <the selector's own sentence>``."""
    if isinstance(spec, Target):
        said = spec.complaint(action, value)
        return None if said is None else f": {said}"
    expected = spec(value)
    return None if expected is None else f" must be {expected}"


def _and(items: list[str]) -> str:
    return items[0] if len(items) == 1 else f"{', '.join(items[:-1])} and {items[-1]}"


def _or(items: list[str]) -> str:
    return ", or ".join(items)


def _empty_text_only_clears(args: Mapping[str, Any]) -> str | None:
    if args["text"] == "" and args.get("clear") is not True:
        return "argument 'text' of type may be empty only with clear: true (which empties the field)"
    return None


POINT: dict[str, Spec] = {"x": _coordinate, "y": _coordinate}
POINTS: dict[str, Spec] = {"x1": _coordinate, "y1": _coordinate, "x2": _coordinate, "y2": _coordinate}
BY_TARGET: dict[str, Spec] = {"target": TARGET}
NOTHING = Action(forms=(Form(),))


def _one(required: Mapping[str, Spec] | None = None, optional: Mapping[str, Spec] | None = None) -> Action:
    return Action(forms=(Form(required=required or {}, optional=optional or {}),))


def _point_or_target(optional: Mapping[str, Spec] | None = None) -> Action:
    extra = dict(optional or {})
    return Action(forms=(Form(required=POINT, optional=extra), Form(required=BY_TARGET, optional=extra)))


# The table of protocol v1.2, in the order specs/protocol.md lists it. Defaults and what each
# action does are in specs/protocol.md (Plan); the executor applies the defaults.
ACTIONS: dict[str, Action] = {
    "shell": _one({"command": _string}, {"timeout_seconds": _timeout(MAX_SECONDS)}),
    "tap": _point_or_target(),
    "double_tap": _point_or_target(),
    "long_press": _point_or_target({"duration_ms": _press_ms}),
    "swipe": Action(
        forms=(
            Form(required=POINTS, optional={"duration_ms": _duration_ms}),
            Form(required={"direction": _direction}, optional={"target": TARGET, "duration_ms": _duration_ms}),
        )
    ),
    "scroll": _one({"direction": _direction}, {"target": TARGET}),
    "scroll_until_visible": _one({"target": TARGET_NO_INDEX}, {"direction": _direction, "max_swipes": _max_swipes}),
    "back": NOTHING,
    "home": NOTHING,
    "enter": NOTHING,
    "text": _one({"text": _any_string}),
    "type": Action(
        forms=(Form(required={"text": _any_string}, optional={"target": TARGET, "clear": _boolean}),),
        rule=_empty_text_only_clears,
    ),
    "keyevent": _one({"key": _key}),
    "launch": _one({"package": _string}, {"activity": _string}),
    "stop_app": _one({"package": _package}),
    "clear_app_data": _one({"package": _package}),
    "open_url": _one({"url": _url}),
    "set_orientation": _one({"orientation": _one_of(ORIENTATIONS)}),
    "list_apps": _one(optional={"third_party": _boolean}),
    "wait": _one({"seconds": _seconds}),
    "wait_for": _one({"target": TARGET_NO_INDEX}, {"gone": _boolean, "timeout_seconds": _wait_timeout}),
    "wait_for_idle": _one(optional={"quiet_ms": _quiet_ms, "timeout_seconds": _wait_timeout}),
    "assert_visible": _one({"target": TARGET_NO_INDEX}),
    "assert_not_visible": _one({"target": TARGET_NO_INDEX}),
    "screenshot": _one(
        optional={
            "scale": _scale,
            "format": _one_of(IMAGE_FORMATS),
            "quality": _quality,
            "marks": _boolean,
            "settle": _boolean,
        }
    ),
    "ui_tree": _one(optional={"diff": _boolean, "settle": _boolean}),
    "ui_dump": _one(optional={"settle": _boolean}),
    "logcat": _one(optional={"lines": _lines}),
    # -- apps and files (specs/protocol.md Part F, "Actions that take inputs") --
    "install": _one({"input": input_argument}, {"replace": _boolean, "grant_permissions": _boolean}),
    "uninstall": _one({"package": _package}),
    "push": _one({"input": input_argument, "path": _device_path}),
    "pull": _one({"path": _device_path}),
    # -- screen recording (issue 26; specs/protocol.md, "Screen recording") --
    "record": _one({"mode": _one_of(RECORD_MODES)}),
}


def refusal(action: Any, args: Mapping[str, Any]) -> str | None:
    """Why `action` with `args` is not a valid call, as one sentence naming the argument
    (``argument 'scale' of screenshot must be a number in 0.1..1 (1 is full size)``), or None."""
    if not isinstance(action, str):
        return f"action must be a string, one of {', '.join(ACTIONS)}"
    if action not in ACTIONS:
        return f"unknown action {action!r}; known actions: {', '.join(ACTIONS)}"
    return ACTIONS[action].refusal(action, args)
