"""The page catalogue: what each activity shows, given the screen's state.

`screens` (its docstring is the tour of the pages) puts this together with `layout` and
`drawing`; `gestures` decides what an input event does to the state.
"""

from __future__ import annotations

from collections.abc import Mapping

import attrs

from .spec import LAUNCHER, SimDeviceSpec

RECENTS = "com.android.launcher3/com.android.quickstep.RecentsActivity"
LIST_ROWS = 40
GREETING_DELAY = 1.0  # seconds after .WelcomeActivity opened
READY_DELAY = 1.5  # seconds after .SlowActivity opened
LONG_PRESS_MENU = ("Copy", "Delete")


@attrs.frozen(kw_only=True)
class ScreenState:
    """Everything a page depends on (the device builds one from its state)."""

    component: str = LAUNCHER  # the foreground "package/activity"
    rotation: int = 0  # 0 portrait, 1 landscape (90 degrees), as user_rotation says
    elapsed: float = 0.0  # seconds since the foreground activity opened
    fields: Mapping[str, str] = attrs.field(factory=dict)  # field resource id -> its text
    focused: str | None = None  # the focused field's resource id
    scroll: int = 0  # rows the page's list is scrolled by
    menu: str | None = None  # the row whose long-press menu is open
    double_tapped: frozenset[str] = frozenset()  # rows that saw a double tap
    recents: tuple[str, ...] = ()  # components on the task stack, newest first


@attrs.frozen(kw_only=True)
class Item:
    """One element of a page, laid out in its own row (a `list` takes the rest)."""

    kind: str = "row"  # row | field | button | text | list
    text: str = ""
    resource_id: str = "android:id/title"
    opens: str | None = None  # "package/activity" a tap opens
    gesture: str = ""  # "double-tap": reacts to a double tap; "menu": a long press opens a menu
    rows: tuple[str, ...] = ()  # a list's rows


@attrs.frozen
class Page:
    title: str
    items: tuple[Item, ...]


_SETTINGS = "com.android.settings"
_EXAMPLE = "com.example.app"
_CHROME = "com.android.chrome"
URL_BAR = f"{_CHROME}:id/url_bar"
USERNAME = f"{_EXAMPLE}:id/username"


def _id(name: str) -> str:
    return f"{_EXAMPLE}:id/{name}"


def _opens(text: str, name: str, activity: str) -> Item:
    return Item(text=text, resource_id=_id(name), opens=f"{_EXAMPLE}/{activity}")


# Pages that do not depend on the state: "package/activity" -> page.
STATIC_PAGES: dict[str, Page] = {
    f"{_SETTINGS}/.Settings": Page(
        "Settings",
        (
            Item(text="Network & internet", opens=f"{_SETTINGS}/.Settings$NetworkDashboardActivity"),
            Item(text="Connected devices"),
            Item(text="Display", opens=f"{_SETTINGS}/.Settings$DisplaySettingsActivity"),
            Item(text="Battery"),
        ),
    ),
    f"{_SETTINGS}/.Settings$NetworkDashboardActivity": Page(
        "Network & internet",
        (Item(text="Internet"), Item(text="SIMs"), Item(text="Airplane mode"), Item(text="Hotspot & tethering")),
    ),
    f"{_SETTINGS}/.Settings$DisplaySettingsActivity": Page(
        "Display", (Item(text="Brightness level"), Item(text="Dark theme"), Item(text="Screen timeout"))
    ),
    f"{_EXAMPLE}/.MainActivity": Page(
        "Example",
        (
            Item(kind="field", text="Username", resource_id=USERNAME),
            Item(kind="button", text="Log in", resource_id=_id("login"), opens=f"{_EXAMPLE}/.WelcomeActivity"),
            _opens("Details", "details", ".DetailActivity"),
            _opens("Catalogue", "catalogue", ".ListActivity"),
            _opens("Slow page", "slow", ".SlowActivity"),
            _opens("Gestures", "gestures", ".GestureActivity"),
        ),
    ),
    f"{_EXAMPLE}/.DetailActivity": Page(
        "Details", (Item(text="Item 1", resource_id=_id("item")), Item(text="Item 2", resource_id=_id("item")))
    ),
    f"{_EXAMPLE}/.ListActivity": Page(
        "Catalogue",
        (Item(kind="list", resource_id=_id("list"), rows=tuple(f"Item {n}" for n in range(1, LIST_ROWS + 1))),),
    ),
    f"{_CHROME}/com.google.android.apps.chrome.Main": Page(
        "Chrome", (Item(kind="field", text="Search or type web address", resource_id=URL_BAR),)
    ),
}

LABELS = {_SETTINGS: "Settings", _CHROME: "Chrome", _EXAMPLE: "Example"}


def label(package: str) -> str:
    return LABELS.get(package, package.rsplit(".", 1)[-1].capitalize())


def page(spec: SimDeviceSpec, state: ScreenState) -> Page:
    """The page the foreground activity shows in `state`."""
    component = state.component
    if component == LAUNCHER:
        return Page(
            "Home",
            tuple(
                Item(
                    text=label(package), resource_id="com.android.launcher3:id/icon", opens=f"{package}/{activities[0]}"
                )
                for package, activities in sorted(spec.packages.items())
                if activities
            ),
        )
    if component == RECENTS:
        return Page(
            "Recents",
            tuple(
                Item(text=label(recent.split("/")[0]), resource_id="com.android.launcher3:id/snapshot", opens=recent)
                for recent in state.recents
            ),
        )
    if component in STATIC_PAGES:
        return STATIC_PAGES[component]
    if component == f"{_EXAMPLE}/.WelcomeActivity":
        if state.elapsed < GREETING_DELAY:
            return Page("Welcome", (Item(kind="text", text="Signing in…", resource_id=_id("progress")),))
        name = state.fields.get(USERNAME, "")
        return Page("Welcome", (Item(kind="text", text=f"Signed in as {name}", resource_id=_id("greeting")),))
    if component == f"{_EXAMPLE}/.SlowActivity":
        status = "Ready" if state.elapsed >= READY_DELAY else "Loading…"
        return Page("Slow page", (Item(kind="text", text=status, resource_id=_id("status")),))
    if component == f"{_EXAMPLE}/.GestureActivity":
        double = _id("double_tap")
        return Page(
            "Gestures",
            (
                Item(
                    text="Double-tapped" if double in state.double_tapped else "Double-tap me",
                    resource_id=double,
                    gesture="double-tap",
                ),
                Item(text="Press and hold", resource_id=_id("hold"), gesture="menu"),
            ),
        )
    return Page(component.rsplit("/", 1)[-1].rsplit(".", 1)[-1].split("$")[-1], ())
