"""What the simulated screen shows: a small UI tree per activity, its `uiautomator dump`
XML, its screenshot, and which node a tap lands on.

Everything here is a pure function of (device spec, foreground activity, typed text), so
one state always gives the same dump and the same PNG, and two states that look different
give different ones.

Layout: the screen is cut into rows of height/12 pixels. Row 0 is the title bar; each item
of the page takes the next row, as a clickable row (a LinearLayout holding a TextView) or a
text field (an EditText, showing the typed text, else its hint). A row whose `opens` names
an activity of the device's packages opens it when tapped. The home screen (`LAUNCHER`)
lists one row per installed package; tapping it launches that package.

Pages (`PAGES`): Settings has "Network & internet" and "Display", which open their
sub-pages (`.Settings$NetworkDashboardActivity`, `.Settings$DisplaySettingsActivity`);
com.example.app's main screen has a text field and a "Details" row that opens
`.DetailActivity`; Chrome has its address bar. Any other activity gets a generic page
with its name as the title.

The screenshot draws the same rows: the background colour comes from the foreground
activity, each row's colour from its text, and while typed text exists, a strip at the
bottom (the keyboard) takes a colour from it, so typing changes the image on any page.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from xml.sax.saxutils import quoteattr

import attrs

from .png import render_screen
from .spec import LAUNCHER, SimDeviceSpec

ROWS = 12
TITLE_BAR = (32, 33, 36)


@attrs.frozen(kw_only=True)
class Item:
    """One row of a page."""

    text: str
    resource_id: str = "android:id/title"
    opens: str | None = None  # "package/activity" a tap opens
    editable: bool = False  # an EditText showing the typed text (or `text` as its hint)


_SETTINGS = "com.android.settings"
_EXAMPLE = "com.example.app"

# "package/activity" -> (title, rows)
PAGES: dict[str, tuple[str, tuple[Item, ...]]] = {
    f"{_SETTINGS}/.Settings": (
        "Settings",
        (
            Item(text="Network & internet", opens=f"{_SETTINGS}/.Settings$NetworkDashboardActivity"),
            Item(text="Connected devices"),
            Item(text="Display", opens=f"{_SETTINGS}/.Settings$DisplaySettingsActivity"),
            Item(text="Battery"),
        ),
    ),
    f"{_SETTINGS}/.Settings$NetworkDashboardActivity": (
        "Network & internet",
        (
            Item(text="Internet"),
            Item(text="SIMs"),
            Item(text="Airplane mode"),
            Item(text="Hotspot & tethering"),
        ),
    ),
    f"{_SETTINGS}/.Settings$DisplaySettingsActivity": (
        "Display",
        (
            Item(text="Brightness level"),
            Item(text="Dark theme"),
            Item(text="Screen timeout"),
        ),
    ),
    f"{_EXAMPLE}/.MainActivity": (
        "Example",
        (
            Item(text="Type here", resource_id=f"{_EXAMPLE}:id/input", editable=True),
            Item(text="Details", resource_id=f"{_EXAMPLE}:id/details", opens=f"{_EXAMPLE}/.DetailActivity"),
        ),
    ),
    f"{_EXAMPLE}/.DetailActivity": (
        "Details",
        (
            Item(text="Item 1", resource_id=f"{_EXAMPLE}:id/item"),
            Item(text="Item 2", resource_id=f"{_EXAMPLE}:id/item"),
        ),
    ),
    "com.android.chrome/com.google.android.apps.chrome.Main": (
        "Chrome",
        (Item(text="Search or type web address", resource_id="com.android.chrome:id/url_bar", editable=True),),
    ),
}

LABELS = {_SETTINGS: "Settings", "com.android.chrome": "Chrome", _EXAMPLE: "Example"}


@attrs.frozen(kw_only=True)
class Node:
    """One node of the UI tree, as `uiautomator dump` describes it."""

    cls: str
    package: str
    bounds: tuple[int, int, int, int]  # x1, y1, x2, y2 (x2, y2 exclusive)
    text: str = ""
    resource_id: str = ""
    clickable: bool = False
    focusable: bool = False
    opens: str | None = None
    children: tuple[Node, ...] = ()

    def contains(self, x: int, y: int) -> bool:
        x1, y1, x2, y2 = self.bounds
        return x1 <= x < x2 and y1 <= y < y2

    def walk(self) -> Iterator[Node]:
        yield self
        for child in self.children:
            yield from child.walk()


@attrs.frozen(kw_only=True)
class Screen:
    component: str  # the foreground "package/activity"
    root: Node
    typed_text: str

    def tap_target(self, x: int, y: int) -> Node | None:
        """The innermost clickable node under (x, y), or None."""
        hits = [node for node in self.root.walk() if node.clickable and node.contains(x, y)]
        return hits[-1] if hits else None


def label(package: str) -> str:
    return LABELS.get(package, package.rsplit(".", 1)[-1].capitalize())


def _page(spec: SimDeviceSpec, component: str) -> tuple[str, tuple[Item, ...]]:
    if component == LAUNCHER:
        return "Home", tuple(
            Item(text=label(package), resource_id="com.android.launcher3:id/icon", opens=f"{package}/{activities[0]}")
            for package, activities in sorted(spec.packages.items())
            if activities
        )
    if component in PAGES:
        return PAGES[component]
    return component.rsplit("/", 1)[-1].rsplit(".", 1)[-1].split("$")[-1], ()


def current_screen(spec: SimDeviceSpec, foreground: str | None, typed_text: str) -> Screen:
    """The screen a device in this state shows."""
    component = foreground or LAUNCHER
    package = component.split("/")[0]
    title, items = _page(spec, component)
    row = spec.height // ROWS
    width = spec.width
    children = [
        Node(
            cls="android.widget.TextView",
            package=package,
            bounds=(0, 0, width, row),
            text=title,
            resource_id=f"{package}:id/toolbar_title",
        )
    ]
    for index, item in enumerate(items[: ROWS - 2]):
        top = row * (index + 1)
        bounds = (0, top, width, top + row)
        if item.editable:
            children.append(
                Node(
                    cls="android.widget.EditText",
                    package=package,
                    bounds=bounds,
                    text=typed_text or item.text,
                    resource_id=item.resource_id,
                    clickable=True,
                    focusable=True,
                )
            )
            continue
        text = Node(
            cls="android.widget.TextView",
            package=package,
            text=item.text,
            resource_id=item.resource_id,
            bounds=(width // 20, top + row // 4, width - width // 20, top + row - row // 4),
        )
        children.append(
            Node(
                cls="android.widget.LinearLayout",
                package=package,
                bounds=bounds,
                clickable=True,
                focusable=True,
                opens=item.opens,
                children=(text,),
            )
        )
    root = Node(
        cls="android.widget.FrameLayout", package=package, bounds=(0, 0, width, spec.height), children=tuple(children)
    )
    return Screen(component=component, root=root, typed_text=typed_text)


# --- uiautomator dump ------------------------------------------------------------------


def hierarchy_xml(screen: Screen) -> bytes:
    """The screen as `uiautomator dump` writes it: one line, no trailing newline."""
    parts = ["<?xml version='1.0' encoding='UTF-8' standalone='yes' ?><hierarchy rotation=\"0\">"]
    _node_xml(screen.root, 0, parts)
    parts.append("</hierarchy>")
    return "".join(parts).encode()


def _node_xml(node: Node, index: int, parts: list[str]) -> None:
    x1, y1, x2, y2 = node.bounds
    flags = {
        "checkable": False,
        "checked": False,
        "clickable": node.clickable,
        "enabled": True,
        "focusable": node.focusable,
        "focused": False,
        "scrollable": False,
        "long-clickable": False,
        "password": False,
        "selected": False,
    }
    attributes = [
        ("index", str(index)),
        ("text", node.text),
        ("resource-id", node.resource_id),
        ("class", node.cls),
        ("package", node.package),
        ("content-desc", ""),
    ]
    attributes += [(name, "true" if value else "false") for name, value in flags.items()]
    attributes.append(("bounds", f"[{x1},{y1}][{x2},{y2}]"))
    parts.append("<node " + " ".join(f"{name}={quoteattr(value)}" for name, value in attributes))
    if not node.children:
        parts.append(" />")
        return
    parts.append(">")
    for child_index, child in enumerate(node.children):
        _node_xml(child, child_index, parts)
    parts.append("</node>")


# --- screencap -------------------------------------------------------------------------


def _colour(text: str) -> tuple[int, int, int]:
    digest = hashlib.sha256(text.encode()).digest()
    return digest[0], digest[1], digest[2]


def screenshot_png(spec: SimDeviceSpec, screen: Screen) -> bytes:
    """The screen as a PNG (see the module docstring for what it draws)."""
    row = spec.height // ROWS
    margin = max(1, row // 16)
    boxes = []
    for node in screen.root.children:
        x1, y1, x2, y2 = node.bounds
        if y1 == 0:
            boxes.append((x1, y1, x2, y2, TITLE_BAR))
        else:
            label_text = node.text or "".join(child.text for child in node.children)
            boxes.append((x1 + margin, y1 + margin, x2 - margin, y2 - margin, _colour(f"{node.cls}:{label_text}")))
    if screen.typed_text:
        boxes.append((0, spec.height - row // 2, spec.width, spec.height, _colour("typed:" + screen.typed_text)))
    return render_screen(spec.width, spec.height, _colour(screen.component), tuple(boxes))
