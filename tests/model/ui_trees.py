"""Generated uiautomator dumps for the property tests of amc.core.ui.

A `GenTree` is a screen as a test knows it: nodes with the attributes a `uiautomator dump`
writes, in a random tree, rendered to the XML the parser reads. Every node's `package` is
its serial ("p7"), so a test can tell which generated node a parsed element came from.
Values come from small pools so that selectors match several nodes, casefolding matters
("ß"/"SS", "İ") and some bounds are unreadable, empty or off the screen.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from xml.sax.saxutils import quoteattr

from hypothesis import strategies as st

TEXTS = [
    "",
    "",
    "Log in",
    "log in",
    "LOG IN",
    "Login",
    "Item 1",
    "Item 10",
    "Straße",
    "STRASSE",
    "İstanbul",
    'say "hi" & <go>',
]
DESCRIPTIONS = ["", "", "", "Navigate up", "navigate UP", "Log in", "More options"]
RESOURCE_IDS = ["", "", "com.example.app:id/login", "login", "android:id/title", "com.other:id/login", "a:id/b:id/c"]
CLASSES = [
    "android.widget.TextView",
    "android.widget.Button",
    "android.widget.EditText",
    "android.widget.LinearLayout",
    "android.widget.FrameLayout",
    "Button",
    "com.example.Widget.Button",
]
FLAGS = ["checkable", "checked", "clickable", "enabled", "focusable", "focused", "scrollable", "long-clickable"]
SIZES = [(1080, 2400), (2400, 1080), (320, 480)]
# What an XML attribute can hold (no control characters, lone surrogates or unassigned code points).
XML_CHARACTERS = st.characters(exclude_categories=("Cc", "Cs", "Cn"))
BOUNDS_TEXT = re.compile(r"^\[(-?\d+),(-?\d+)\]\[(-?\d+),(-?\d+)\]$")

# Values a selector asks for: the pools' own, and parts of them.
SELECTOR_VALUES = [v for v in {*TEXTS, *DESCRIPTIONS, *RESOURCE_IDS, *CLASSES} if v] + [
    "og",
    "İstanbul".casefold(),
    "strasse",
    "i̇stanbul",
    "b:id/c",
    "c",
    "title",
    "TextView",
    "Widget.Button",
    "Nothing like it",
]


@dataclass(frozen=True)
class GenNode:
    serial: int
    attributes: dict[str, str]
    children: tuple[GenNode, ...] = field(default=())

    def preorder(self) -> list[GenNode]:
        return [self, *(node for child in self.children for node in child.preorder())]

    def xml(self, index: int = 0) -> str:
        attributes = {"index": str(index), **self.attributes, "package": f"p{self.serial}"}
        head = "<node " + " ".join(f"{name}={quoteattr(value)}" for name, value in attributes.items())
        if not self.children:
            return head + " />"
        return head + ">" + "".join(child.xml(i) for i, child in enumerate(self.children)) + "</node>"

    def with_node(self, serial: int, **changes: str) -> GenNode:
        """This tree with node `serial`'s attributes changed."""
        attributes = {**self.attributes, **changes} if self.serial == serial else self.attributes
        return replace(
            self, attributes=attributes, children=tuple(c.with_node(serial, **changes) for c in self.children)
        )

    def with_child(self, parent: int, child: GenNode, at: int) -> GenNode:
        """This tree with `child` hung under node `parent`, at position `at` among its children."""
        children = tuple(c.with_child(parent, child, at) for c in self.children)
        if self.serial == parent:
            children = (*children[:at], child, *children[at:])
        return replace(self, children=children)

    def without_node(self, serial: int) -> GenNode:
        """This tree with node `serial` (and what it holds) taken out; the root stays."""
        kept = tuple(c.without_node(serial) for c in self.children if c.serial != serial)
        return replace(self, children=kept)


@dataclass(frozen=True)
class GenTree:
    root: GenNode
    width: int
    height: int
    rotation: int

    def xml(self) -> str:
        return (
            "<?xml version='1.0' encoding='UTF-8' standalone='yes' ?>"
            f'<hierarchy rotation="{self.rotation}">{self.root.xml()}</hierarchy>'
        )

    def nodes(self) -> list[GenNode]:
        return self.root.preorder()


def bounds_of(node: GenNode) -> tuple[int, int, int, int] | None:
    """A node's bounds as the contract reads them: readable and with positive area, or None."""
    found = BOUNDS_TEXT.match(node.attributes.get("bounds", ""))
    if found is None:
        return None
    left, top, right, bottom = (int(g) for g in found.groups())
    return (left, top, right, bottom) if right > left and bottom > top else None


def on_screen(tree: GenTree) -> list[GenNode]:
    """The nodes with area on the screen, in document order (the reference for `Screen.nodes`)."""
    found = []
    for node in tree.nodes():
        bounds = bounds_of(node)
        if bounds is None:
            continue
        left, top, right, bottom = bounds
        if min(right, tree.width) - max(left, 0) > 0 and min(bottom, tree.height) - max(top, 0) > 0:
            found.append(node)
    return found


def shown(node: GenNode) -> bool:
    """Whether a node belongs in the compact list (the reference for `Screen.elements`)."""
    a = node.attributes
    flagged = any(a.get(flag) == "true" for flag in ("clickable", "long-clickable", "checkable", "scrollable"))
    return bool(a.get("text") or a.get("content-desc") or a.get("resource-id") or flagged) or a.get(
        "class", ""
    ).endswith("EditText")


@st.composite
def bounds_text(draw: st.DrawFn, width: int, height: int) -> str:
    kind = draw(st.sampled_from(["inside"] * 6 + ["anywhere", "empty", "unreadable"]))
    if kind == "unreadable":
        return draw(st.sampled_from(["", "[1,2]", "[a,b][c,d]", "0,0,10,10"]))
    if kind == "empty":
        left, top = draw(st.integers(0, width)), draw(st.integers(0, height))
        return f"[{left},{top}][{left + draw(st.integers(-5, 0))},{top + draw(st.integers(0, 9))}]"
    if kind == "anywhere":
        xs = sorted(draw(st.lists(st.integers(-200, width + 200), min_size=2, max_size=2)))
        ys = sorted(draw(st.lists(st.integers(-200, height + 200), min_size=2, max_size=2)))
    else:
        xs = sorted(draw(st.lists(st.integers(0, width), min_size=2, max_size=2, unique=True)))
        ys = sorted(draw(st.lists(st.integers(0, height), min_size=2, max_size=2, unique=True)))
    return f"[{xs[0]},{ys[0]}][{xs[1]},{ys[1]}]"


@st.composite
def node_attributes(draw: st.DrawFn, width: int, height: int) -> dict[str, str]:
    attributes = {
        "text": draw(st.sampled_from(TEXTS) | st.text(XML_CHARACTERS, max_size=4)),
        "resource-id": draw(st.sampled_from(RESOURCE_IDS)),
        "class": draw(st.sampled_from(CLASSES)),
        "content-desc": draw(st.sampled_from(DESCRIPTIONS)),
    }
    # Each flag written or left out at random (uiautomator writes them all; a parser must not
    # need them), "true" about one time in four; "enabled" always written, "true".
    written, true_a, true_b = (draw(st.integers(0, 2 ** len(FLAGS) - 1)) for _ in range(3))
    for bit, flag in enumerate(FLAGS):
        if written >> bit & 1 or flag == "enabled":
            attributes[flag] = "true" if (true_a & true_b) >> bit & 1 or flag == "enabled" else "false"
    attributes["bounds"] = draw(bounds_text(width, height))
    return attributes


@st.composite
def trees(draw: st.DrawFn, max_nodes: int = 16) -> GenTree:
    """A random screen: a root spanning it, and nodes hung at random below it."""
    width, height = draw(st.sampled_from(SIZES))
    count = draw(st.integers(1, max_nodes))
    parents = [draw(st.integers(0, serial - 1)) for serial in range(1, count)]
    attributes = [draw(node_attributes(width, height)) for _ in range(count)]
    attributes[0] = {**attributes[0], "bounds": f"[0,0][{width},{height}]"}

    def build(serial: int) -> GenNode:
        # Children in a drawn order, so document order is not the order of serials.
        kids = [child for child, parent in enumerate(parents, start=1) if parent == serial]
        kids = draw(st.permutations(kids))
        return GenNode(serial, attributes[serial], tuple(build(child) for child in kids))

    return GenTree(root=build(0), width=width, height=height, rotation=0 if width < height else 1)


def texts_xml(*rows: str, width: int = 1080, height: int = 2400) -> str:
    """A small dump by hand: a root and one clickable TextView row per text, top to bottom."""
    nodes = "".join(
        f'<node text={quoteattr(text)} class="android.widget.TextView" package="t" clickable="true" '
        f'bounds="[0,{100 * i}][{width},{100 * (i + 1)}]" />'
        for i, text in enumerate(rows)
    )
    return f'<hierarchy rotation="0"><node class="android.widget.FrameLayout" bounds="[0,0][{width},{height}]">{nodes}</node></hierarchy>'
