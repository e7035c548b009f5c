"""Touch gestures and navigation keys: tap, double_tap, long_press, swipe, scroll,
scroll_until_visible, back, home, enter.

A gesture acts at a point (`x`, `y`) or on an element (`target`, read from a fresh dump, see
`screen`); on an element its outcome is `{"element": ELEMENT, "point": [x, y]}`, the element
matched and where the finger went down.

Directions: a `swipe` moves the finger that way; a `scroll` names where the *content* comes
from (`down` shows what is below, so the finger moves up). Both cover `SPAN` of their area (the
target's bounds, else the screen) through its centre, so the finger starts and ends inside it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from amc.core.ui.tree import Element, Screen

from . import commands as build
from .calls import ActionResult, Call, as_json, number, required
from .errors import StepFailed
from .screen import dump, locate, selector, showed, visible

Box = tuple[int, int, int, int]
Line = tuple[int, int, int, int]

DIRECTIONS = ("up", "down", "left", "right")
# scroll direction (where the content comes from) -> the way the finger moves
_FINGER = {"down": "up", "up": "down", "right": "left", "left": "right"}
SPAN = 0.6
SWIPE_MS = 300
SCROLL_MS = 400  # slow enough that the list follows the finger rather than flinging far
LONG_PRESS_MS = 1000
MAX_PRESS_MS = 60_000
MAX_SWIPE_MS = 600_000


def swipe_line(area: Box, direction: str) -> Line:
    """(x1, y1, x2, y2) of a finger moving `direction` across SPAN of `area`, through its centre."""
    left, top, right, bottom = area
    x, y = (left + right) // 2, (top + bottom) // 2
    dx, dy = int((right - left) * SPAN / 2), int((bottom - top) * SPAN / 2)
    return {
        "up": (x, y + dy, x, y - dy),
        "down": (x, y - dy, x, y + dy),
        "left": (x + dx, y, x - dx, y),
        "right": (x - dx, y, x + dx, y),
    }[direction]


def scroll_line(area: Box, direction: str) -> Line:
    """The finger's line that brings the content from `direction` into view."""
    return swipe_line(area, _FINGER[direction])


def screen_box(screen: Screen) -> Box:
    return (0, 0, screen.width, screen.height)


def within(box: Box, screen: Screen) -> Box:
    """`box` clipped to the screen, so a gesture never starts off it."""
    left, top, right, bottom = box
    return (max(0, left), max(0, top), min(screen.width, right), min(screen.height, bottom))


def scroll_area(screen: Screen) -> Box:
    """Where to scroll when no target says: the largest scrollable element, else the screen."""
    scrollables = [node for node in screen.nodes if node.scrollable]
    if not scrollables:
        return screen_box(screen)
    largest = max(scrollables, key=lambda node: (node.bounds[2] - node.bounds[0]) * (node.bounds[3] - node.bounds[1]))
    return within(largest.bounds, screen)


def direction(args: dict[str, Any], default: str | None = None) -> str:
    value = args.get("direction", default)
    if value not in DIRECTIONS:
        raise StepFailed(f"direction must be one of {', '.join(DIRECTIONS)}, got {value!r}")
    return str(value)


def tap(call: Call, args: dict[str, Any]) -> ActionResult:
    return _at_point_or_element(call, args, "tap", build.tap)


def double_tap(call: Call, args: dict[str, Any]) -> ActionResult:
    return _at_point_or_element(call, args, "double_tap", build.double_tap)


def long_press(call: Call, args: dict[str, Any]) -> ActionResult:
    duration = int(number(args, "duration_ms", LONG_PRESS_MS, 1, MAX_PRESS_MS))
    return _at_point_or_element(
        call, args, "long_press", lambda x, y: build.long_press(x, y, duration), extra=duration / 1000
    )


def swipe(call: Call, args: dict[str, Any]) -> ActionResult:
    if "direction" not in args:
        x1, y1, x2, y2 = (required(args, name) for name in ("x1", "y1", "x2", "y2"))
        payload = build.swipe(x1, y1, x2, y2, duration_ms=args.get("duration_ms"))
        call.set_deadline(call.limits.command_timeout + _seconds(args.get("duration_ms")))
        return call.result("swipe", output=call.fixed(payload))
    duration = int(number(args, "duration_ms", SWIPE_MS, 0, MAX_SWIPE_MS))
    towards = direction(args)
    area, element = _area(call, args)
    return _move(call, "swipe", swipe_line(area, towards), duration, element)


def scroll(call: Call, args: dict[str, Any]) -> ActionResult:
    towards = direction(args)
    area, element = _area(call, args)
    return _move(call, "scroll", scroll_line(area, towards), SCROLL_MS, element)


def scroll_until_visible(call: Call, args: dict[str, Any]) -> ActionResult:
    """Scroll (the largest scrollable element, else the screen) until the target shows."""
    target = selector(args, index=False)
    towards = direction(args, "down")
    most = int(number(args, "max_swipes", 10, 1, 100))
    call.set_deadline(call.limits.command_timeout + most * (SCROLL_MS / 1000 + call.limits.command_timeout / 10))
    screen = dump(call).screen
    for swipes in range(most + 1):
        element = visible(target, screen)
        if element is not None:
            return call.result("scroll_until_visible", output=as_json({"element": element.to_json(), "swipes": swipes}))
        if swipes == most:
            break
        call.fixed(build.swipe(*scroll_line(scroll_area(screen), towards), duration_ms=SCROLL_MS))
        before, screen = screen, dump(call).screen
        if screen.fingerprint == before.fingerprint:
            raise StepFailed(
                f"{target.describe()} not visible: the screen stopped moving after {swipes + 1} "
                f"scroll(s) {towards}; {showed(screen)}"
            )
    raise StepFailed(f"{target.describe()} not visible after {most} scroll(s) {towards}; {showed(screen)}")


def back(call: Call, args: dict[str, Any]) -> ActionResult:
    return _key(call, "back")


def home(call: Call, args: dict[str, Any]) -> ActionResult:
    return _key(call, "home")


def enter(call: Call, args: dict[str, Any]) -> ActionResult:
    return _key(call, "enter")


# --- helpers --------------------------------------------------------------------------


def _key(call: Call, action: str) -> ActionResult:
    call.set_deadline(call.limits.command_timeout)
    return call.result(action, output=call.fixed(build.keyevents(build.KEYCODES[action])))


def _at_point_or_element(
    call: Call, args: dict[str, Any], action: str, payload: Callable[[int, int], str], extra: float = 0.0
) -> ActionResult:
    """Act at `x`,`y`, or on `target`'s point: its centre clipped to the screen."""
    call.set_deadline(call.limits.command_timeout + extra)
    if "target" not in args:
        x, y = required(args, "x"), required(args, "y")
        return call.result(action, output=call.fixed(payload(x, y)))
    found, _ = locate(call, selector(args))
    x, y = found.point
    call.fixed(payload(x, y))
    return call.result(action, output=_touched(found.element, (x, y)))


def _area(call: Call, args: dict[str, Any]) -> tuple[Box, Element | None]:
    """The target's bounds on the screen and the target, or the whole screen (from a fresh dump)."""
    call.set_deadline(call.limits.command_timeout)
    if "target" in args:
        found, screen = locate(call, selector(args))
        return within(found.element.bounds, screen), found.element
    return screen_box(dump(call).screen), None


def _move(call: Call, action: str, line: Line, duration: int, element: Element | None) -> ActionResult:
    call.set_deadline(call.limits.command_timeout + duration / 1000)
    call.fixed(build.swipe(*line, duration_ms=duration))
    output: dict[str, Any] = {"point": [line[0], line[1]], "to": [line[2], line[3]]}
    if element is not None:
        output = {"element": element.to_json(), **output}
    return call.result(action, output=as_json(output))


def _touched(element: Element, point: tuple[int, int]) -> str:
    return as_json({"element": element.to_json(), "point": list(point)})


def _seconds(duration_ms: Any) -> float:
    return duration_ms / 1000 if isinstance(duration_ms, (int, float)) and not isinstance(duration_ms, bool) else 0.0
