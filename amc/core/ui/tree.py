"""A `uiautomator dump` read into the screen the rest of amc reasons about.

A dump is one line of XML: a `<hierarchy rotation="0|1|2|3">` holding nested `<node>`s with
some twenty attributes each (text, resource-id, class, package, content-desc, a dozen
"true"/"false" flags, and bounds written `[left,top][right,bottom]`, right and bottom
exclusive). Two views of it matter:

- `Screen.nodes`: every node that occupies part of the screen, in document order. Selectors
  match over these, so `{"class": "FrameLayout"}` can find a container nobody labelled.
- `Screen.elements`: the compact list, the nodes worth showing a person or a model (they say
  something, have an id, or react to a gesture). An element's `index` is its position here;
  `{"index": n}` and set-of-marks labels use it. A node outside the list has index -1.

`Screen.fingerprint` is a digest of the compact list (with the screen's size and rotation).
Two dumps with the same fingerprint show the same elements in the same places with the same
flags, which is what an index action needs to be safe and what "the screen has settled" means.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Sequence
from typing import Any
from xml.etree import ElementTree

import attrs

_BOUNDS = re.compile(r"^\[(-?\d+),(-?\d+)\]\[(-?\d+),(-?\d+)\]$")

Bounds = tuple[int, int, int, int]  # left, top, right, bottom; right and bottom exclusive


class DumpError(ValueError):
    """The dump is not XML, or its root is not `<hierarchy>`."""


@attrs.frozen
class Element:
    """One node of a dump. `index` is its position in `Screen.elements`, -1 for a node not in it."""

    index: int
    cls: str  # the full Android class name, e.g. android.widget.Button
    text: str
    description: str  # content-desc
    resource_id: str
    package: str
    bounds: Bounds
    clickable: bool
    long_clickable: bool
    checkable: bool
    checked: bool
    focused: bool
    scrollable: bool
    enabled: bool
    editable: bool  # the class is an EditText (uiautomator has no attribute for it)

    @property
    def centre(self) -> tuple[int, int]:
        left, top, right, bottom = self.bounds
        return (left + right) // 2, (top + bottom) // 2

    @property
    def short_class(self) -> str:
        """The class's last dotted component: `Button` for android.widget.Button."""
        return self.cls.rpartition(".")[2] or self.cls

    @property
    def in_compact_list(self) -> bool:
        """What earns a node its place in `Screen.elements`: it says something or reacts to a gesture."""
        return bool(
            self.text
            or self.description
            or self.resource_id
            or self.clickable
            or self.long_clickable
            or self.checkable
            or self.scrollable
            or self.editable
        )

    def to_json(self) -> dict[str, Any]:
        """The ELEMENT object of a step's output (specs/protocol.md)."""
        return {
            "index": self.index,
            "class": self.cls,
            "text": self.text,
            "description": self.description,
            "resource_id": self.resource_id,
            "bounds": list(self.bounds),
            "clickable": self.clickable,
            "long_clickable": self.long_clickable,
            "checkable": self.checkable,
            "checked": self.checked,
            "focused": self.focused,
            "scrollable": self.scrollable,
            "enabled": self.enabled,
            "editable": self.editable,
        }

    def line(self) -> str:
        """One readable line: `[3] Button "Log in" id=com.example.app:id/login bounds=[0,0][10,20] clickable`."""
        left, top, right, bottom = self.bounds
        parts = [f"[{self.index}]", self.short_class]
        if self.text:
            parts.append(quoted(self.text))
        if self.description:
            parts.append(f"desc={quoted(self.description)}")
        if self.resource_id:
            parts.append(f"id={self.resource_id}")
        parts.append(f"bounds=[{left},{top}][{right},{bottom}]")
        parts += [name for name, on in self._flags() if on]
        if not self.enabled:
            parts.append("disabled")
        return " ".join(parts)

    def _flags(self) -> tuple[tuple[str, bool], ...]:
        return (
            ("clickable", self.clickable),
            ("long-clickable", self.long_clickable),
            ("checkable", self.checkable),
            ("checked", self.checked),
            ("focused", self.focused),
            ("scrollable", self.scrollable),
            ("editable", self.editable),
        )


@attrs.frozen
class Screen:
    """One dump, read: see the module docstring for `nodes`, `elements` and `fingerprint`."""

    nodes: tuple[Element, ...]
    elements: tuple[Element, ...]
    width: int
    height: int
    rotation: int  # 0 natural orientation, 1 = 90 degrees, ... as uiautomator writes it
    fingerprint: str

    def to_json(self) -> dict[str, Any]:
        """`{"screen": {"width", "height", "rotation"}, "fingerprint", "elements": [ELEMENT...]}`."""
        return {
            "screen": {"width": self.width, "height": self.height, "rotation": self.rotation},
            "fingerprint": self.fingerprint,
            "elements": [element.to_json() for element in self.elements],
        }

    def visible_part(self, element: Element) -> Bounds:
        """The element's bounds cut to the screen (empty, right <= left, when it lies off it)."""
        left, top, right, bottom = element.bounds
        return max(left, 0), max(top, 0), min(right, self.width), min(bottom, self.height)


def parse_dump(xml: bytes | str) -> Screen:
    """The screen a `uiautomator dump` shows.

    The screen's size is the first node's right and bottom edges (uiautomator's root spans the
    display); nodes without readable bounds, or with no area on the screen, are left out.

    Raises:
        DumpError: the text is not well-formed XML, or its root is not `<hierarchy>`.
    """
    try:
        root = ElementTree.fromstring(xml)
    except ElementTree.ParseError as error:
        raise DumpError(f"the UI dump is not well-formed XML ({error})") from None
    if root.tag != "hierarchy":
        raise DumpError(f"the UI dump's root is <{root.tag}>, not <hierarchy>")
    rotation = _int(root.get("rotation", "0"))
    read = [(node, bounds) for node in root.iter("node") if (bounds := _bounds(node.get("bounds", ""))) is not None]
    width, height = (read[0][1][2], read[0][1][3]) if read else (0, 0)
    nodes: list[Element] = []
    elements: list[Element] = []
    for node, bounds in read:
        left, top, right, bottom = bounds
        if min(right, width) <= max(left, 0) or min(bottom, height) <= max(top, 0):
            continue  # no area on the screen: nothing to see, nothing to touch
        element = _element(node, bounds, index=len(elements))  # most nodes are listed: numbered at once
        if element.in_compact_list:
            elements.append(element)
        else:
            element = attrs.evolve(element, index=-1)
        nodes.append(element)
    return Screen(
        nodes=tuple(nodes),
        elements=tuple(elements),
        width=width,
        height=height,
        rotation=rotation,
        fingerprint=fingerprint(elements, width=width, height=height, rotation=rotation),
    )


def fingerprint(elements: Sequence[Element], *, width: int, height: int, rotation: int) -> str:
    """A digest of what the compact list shows: equal for equal lists on equal screens."""
    content = [[width, height, rotation]] + [[element.package, *element.to_json().values()] for element in elements]
    encoded = json.dumps(content, ensure_ascii=False, separators=(",", ":")).encode()
    return hashlib.sha256(encoded).hexdigest()[:16]


def quoted(text: str) -> str:
    """Text in double quotes on one line (a newline in a label would break a one-element-a-line listing)."""
    flat = text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
    return f'"{flat}"'


def _element(node: ElementTree.Element, bounds: Bounds, index: int) -> Element:
    cls = node.get("class", "")

    def flag(name: str, default: bool = False) -> bool:
        value = node.get(name)
        return default if value is None else value == "true"

    return Element(
        index=index,
        cls=cls,
        text=node.get("text", ""),
        description=node.get("content-desc", ""),
        resource_id=node.get("resource-id", ""),
        package=node.get("package", ""),
        bounds=bounds,
        clickable=flag("clickable"),
        long_clickable=flag("long-clickable"),
        checkable=flag("checkable"),
        checked=flag("checked"),
        focused=flag("focused"),
        scrollable=flag("scrollable"),
        enabled=flag("enabled", default=True),  # uiautomator always writes it; absent, assume the usual
        editable=cls.endswith("EditText"),
    )


def _bounds(value: str) -> Bounds | None:
    found = _BOUNDS.match(value)
    if found is None:
        return None
    left, top, right, bottom = (int(group) for group in found.groups())
    if right <= left or bottom <= top:
        return None
    return left, top, right, bottom


def _int(value: str) -> int:
    try:
        return int(value)
    except ValueError:
        return 0
