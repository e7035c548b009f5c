"""What the simulated screen shows: a UI tree per activity, its `uiautomator dump` XML, its
screenshots (PNG and raw) and which node an input event lands on.

Everything here is a pure function of (device spec, `ScreenState`), so one state always
gives the same dump and the same frame, and two states that look different give
different ones. The parts: `pages` (what each activity shows), `layout` (the tree and
the dump), `drawing` (the frames) and `gestures` (what an input event does to the state).

Pages (`page()`):
- The home screen (`LAUNCHER`) lists one row per installed package; a tap launches it.
  APP_SWITCH shows Recents (`RECENTS`): one row per app on the task stack, newest first.
- Settings has "Network & internet" and "Display", which open their sub-pages
  (`.Settings$NetworkDashboardActivity`, `.Settings$DisplaySettingsActivity`).
- Chrome has its address bar (`com.android.chrome:id/url_bar`), which shows the URL a
  VIEW intent opened.
- com.example.app (the example app the end-to-end tests drive):
  - `.MainActivity` "Example": the EditText `id/username` (hint "Username"), the Button
    "Log in" (`id/login`, opens `.WelcomeActivity`), and rows "Details"
    (`.DetailActivity`: "Item 1", "Item 2"), "Catalogue" (`.ListActivity`), "Slow page"
    (`.SlowActivity`) and "Gestures" (`.GestureActivity`).
  - `.WelcomeActivity` "Welcome": "Signing in…" (`id/progress`) until 1.0 s after it
    opened, then "Signed in as NAME" (`id/greeting`, NAME = the username field's text).
  - `.ListActivity` "Catalogue": a scrollable list (`id/list`) of the rows "Item 1" to
    "Item 40" (`id/item`), as many as fit; a swipe moves it by whole rows.
  - `.SlowActivity` "Slow page": `id/status` reads "Loading…", and "Ready" from 1.5 s.
  - `.GestureActivity` "Gestures": "Double-tap me" (`id/double_tap`) reads "Double-tapped"
    after a double tap; "Press and hold" (`id/hold`, long-clickable) opens a menu of
    "Copy" and "Delete" after a long press (>= 500 ms); a tap on an entry or anywhere
    else closes it, and so does BACK.
- Any other activity gets a generic page with its name as the title.

Times are "simulated screen time": seconds since the activity opened, on the device's
clock. A page depends on them only through thresholds, so a dump (and a frame) changes
exactly when an element appears.
"""

from __future__ import annotations

from .drawing import png, raw
from .layout import Screen, hierarchy_xml, lay_out
from .pages import ScreenState, page
from .spec import LAUNCHER, SimDeviceSpec

__all__ = ["Screen", "ScreenState", "current_screen", "hierarchy_xml", "screen_of", "screenshot_png", "screenshot_raw"]


def screen_of(spec: SimDeviceSpec, state: ScreenState) -> Screen:
    """The laid-out screen of a device built from `spec` in `state` (landscape swaps the sides)."""
    width, height = (spec.height, spec.width) if state.rotation % 2 else (spec.width, spec.height)
    return lay_out(page(spec, state), state, width, height)


def current_screen(spec: SimDeviceSpec, foreground: str | None, typed_text: str = "") -> Screen:
    """The screen of `foreground` just opened, in portrait, with `typed_text` in its first field."""
    state = ScreenState(component=foreground or LAUNCHER)
    first = next((item.resource_id for item in page(spec, state).items if item.kind == "field"), None)
    if first is not None:
        state = ScreenState(component=state.component, fields={first: typed_text}, focused=first)
    return screen_of(spec, state)


def screenshot_png(spec: SimDeviceSpec, screen: Screen) -> bytes:
    """What `screencap -p` writes."""
    return png(screen)


def screenshot_raw(spec: SimDeviceSpec, screen: Screen) -> bytes:
    """What `screencap` without `-p` writes (the header's length depends on the sdk)."""
    return raw(screen, spec.sdk)
