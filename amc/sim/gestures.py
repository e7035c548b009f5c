"""What an input event does to the screen's state (the `input` and `am broadcast` programs call these).

- A tap lands on the innermost clickable node under it. An EditText takes the focus; a
  node that opens an activity opens it. While a long-press menu is open, any tap closes
  it (an entry, or anywhere else) and does nothing more.
- Two taps on one component, within `TOUCH_SLOP` pixels and `DOUBLE_TAP_SECONDS` of each
  other, are a double tap: the second one reaches a double-tap row as a double tap (a
  third tap starts counting again).
- A swipe that ends where it started is a press: from `LONG_PRESS_SECONDS` on, a long
  press on the long-clickable node under it (a "menu" row opens its menu), else a tap.
  Any other swipe that starts on a scrollable list scrolls it by whole rows, the way the
  finger moved (finger up: the content moves up and later rows come into view), within
  its ends.
- Keys: BACK, HOME, APP_SWITCH (Recents), DEL (deletes the focused field's last
  character), MOVE_END and ENTER (no visible effect: the cursor is always at the end and
  no field submits).
- Text goes to the focused field of the foreground activity; with none focused it lands
  in the device's loose text, which nothing draws (`SimDevice.typed_text` shows it).
Every time is the device's clock, so a test can move it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .device import SimDevice

DOUBLE_TAP_SECONDS = 0.5
LONG_PRESS_SECONDS = 0.5
TOUCH_SLOP = 16  # pixels a finger may wander and still be "at the same point"

KEY_HOME, KEY_BACK, KEY_ENTER, KEY_DEL, KEY_MOVE_END, KEY_APP_SWITCH = 3, 4, 66, 67, 123, 187


def tap(device: SimDevice, x: int, y: int) -> None:
    with device.lock:
        ui = device.ui
        screen = device.screen()
        top = ui.top()
        now = ui.clock()
        previous = ui.last_tap
        ui.last_tap = (x, y, now, screen.component)
        if screen.menu_open():
            top.menu = None
            return
        target = screen.tap_target(x, y)
        if target is None:
            return
        if target.cls == "android.widget.EditText":
            top.focused = target.item
        elif target.gesture == "double-tap" and _second_tap(previous, x, y, now, screen.component):
            top.double_tapped.add(target.item)
            ui.last_tap = None
        elif target.opens is not None:
            package, activity = target.opens.split("/", 1)
            resolved = device.resolve(package, activity)
            if resolved is not None:
                device.open_activity(resolved)


def _second_tap(previous: tuple[int, int, float, str] | None, x: int, y: int, now: float, component: str) -> bool:
    if previous is None:
        return False
    px, py, when, where = previous
    return (
        where == component
        and abs(px - x) <= TOUCH_SLOP
        and abs(py - y) <= TOUCH_SLOP
        and 0 <= now - when <= DOUBLE_TAP_SECONDS
    )


def swipe(device: SimDevice, x1: int, y1: int, x2: int, y2: int, seconds: float) -> None:
    if abs(x2 - x1) <= TOUCH_SLOP and abs(y2 - y1) <= TOUCH_SLOP:
        if seconds < LONG_PRESS_SECONDS:
            tap(device, x1, y1)
            return
        with device.lock:
            screen = device.screen()
            target = screen.long_press_target(x1, y1)
            if target is not None and target.gesture == "menu" and not screen.menu_open():
                device.ui.top().menu = target.item
        return
    with device.lock:
        screen = device.screen()
        if screen.scroll_target(x1, y1) is None:
            return
        top = device.ui.top()
        rows = round((y1 - y2) / screen.row_height)
        top.scroll = max(0, min(screen.scroll_limit, min(top.scroll, screen.scroll_limit) + rows))


def key(device: SimDevice, code: int) -> None:
    if code == KEY_BACK:
        device.back()
    elif code == KEY_HOME:
        device.home()
    elif code == KEY_APP_SWITCH:
        device.show_recents()
    elif code == KEY_DEL:
        with device.lock:
            device.ui.set_text(device.ui.typed_text[:-1])


def type_text(device: SimDevice, text: str) -> None:
    with device.lock:
        device.ui.set_text(device.ui.typed_text + text)


def clear_text(device: SimDevice) -> None:
    with device.lock:
        device.ui.set_text("")
