"""The screen's UI tree, compact enough for a model to read, and the search behind "tap the element".

A `uiautomator dump` is one line of XML with some twenty attributes per node, most of them
`false` or empty. A model needs few of them to decide where to tap: what a node says (its text
or content description), what it is (resource-id, class), where it is (bounds, and the centre a
tap should hit) and whether it reacts to a tap. `compact` keeps the nodes that carry any of
that, in document order, and drops the empty layout containers in between.
"""

from __future__ import annotations

import re
from xml.etree import ElementTree

import attrs

_BOUNDS = re.compile(r"^\[(-?\d+),(-?\d+)\]\[(-?\d+),(-?\d+)\]$")


class UiTreeError(ValueError):
    """The dump is not a uiautomator hierarchy this module can read."""


@attrs.frozen
class Element:
    """One node of the screen worth showing: it has text, a description or an id, or is clickable."""

    index: int  # position among the compact elements, 0-based, in document order
    text: str
    description: str  # content-desc
    resource_id: str
    cls: str  # the Android class, shortened to its last component
    bounds: tuple[int, int, int, int]  # left, top, right, bottom
    clickable: bool

    @property
    def centre(self) -> tuple[int, int]:
        left, top, right, bottom = self.bounds
        return (left + right) // 2, (top + bottom) // 2

    def line(self) -> str:
        """One line: `[3] TextView "Display" id=android:id/title bounds=[54,650][1026,750] centre=540,700`."""
        left, top, right, bottom = self.bounds
        parts = [f"[{self.index}]", self.cls]
        if self.text:
            parts.append(_quoted(self.text))
        if self.description:
            parts.append(f"desc={_quoted(self.description)}")
        if self.resource_id:
            parts.append(f"id={self.resource_id}")
        parts.append(f"bounds=[{left},{top}][{right},{bottom}]")
        parts.append("centre={},{}".format(*self.centre))
        if self.clickable:
            parts.append("clickable")
        return " ".join(parts)


def compact(xml: bytes | str) -> list[Element]:
    """The elements of a uiautomator dump worth showing, in document order.

    Raises:
        UiTreeError: the bytes are not XML, or the root is not `<hierarchy>`.
    """
    try:
        root = ElementTree.fromstring(xml)
    except ElementTree.ParseError as error:
        raise UiTreeError(f"the UI dump is not well-formed XML ({error})") from None
    if root.tag != "hierarchy":
        raise UiTreeError(f"the UI dump's root is <{root.tag}>, not <hierarchy>")
    found: list[Element] = []
    for node in root.iter("node"):
        text = node.get("text", "")
        description = node.get("content-desc", "")
        resource_id = node.get("resource-id", "")
        clickable = node.get("clickable") == "true"
        bounds = _bounds(node.get("bounds", ""))
        if bounds is None or not (text or description or resource_id or clickable):
            continue
        found.append(
            Element(
                index=len(found),
                text=text,
                description=description,
                resource_id=resource_id,
                cls=node.get("class", "").rpartition(".")[2] or "?",
                bounds=bounds,
                clickable=clickable,
            )
        )
    return found


def render(elements: list[Element]) -> str:
    """The elements one per line, or a sentence when the screen shows none."""
    if not elements:
        return "(the screen shows no element with text, a description, an id, or a click handler)"
    return "\n".join(element.line() for element in elements)


def matching(elements: list[Element], *, text: str | None = None, resource_id: str | None = None) -> list[Element]:
    """The elements whose text (or content description) equals `text` and whose resource-id equals
    `resource_id`, each criterion applied when given. Exact matches only: a model that asked for
    "Display" must not get "Display size" tapped for it. When no element matches exactly, the
    comparison of text is retried ignoring case and surrounding spaces."""
    if text is None and resource_id is None:
        raise ValueError("give text or resource_id")

    def by_id(element: Element) -> bool:
        return resource_id is None or element.resource_id == resource_id

    if text is None:
        return [e for e in elements if by_id(e)]
    exact = [e for e in elements if by_id(e) and text in (e.text, e.description)]
    if exact:
        return exact
    folded = text.strip().casefold()
    return [e for e in elements if by_id(e) and folded in (e.text.strip().casefold(), e.description.strip().casefold())]


def _bounds(value: str) -> tuple[int, int, int, int] | None:
    found = _BOUNDS.match(value)
    if found is None:
        return None
    left, top, right, bottom = (int(group) for group in found.groups())
    return left, top, right, bottom


def _quoted(text: str) -> str:
    """Text in double quotes on one line (a newline in a label would break the one-element-a-line form)."""
    flat = text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
    return f'"{flat}"'
