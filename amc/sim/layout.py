"""A page laid out as a UI tree, the way `uiautomator dump` describes one.

The screen (width and height swapped in landscape) is cut into `ROWS` rows of height/12
pixels. Row 0 is the title bar; each item of the page takes the next row:
- a row: a clickable LinearLayout holding a TextView (inset by 1/20 of the width and a
  quarter of the row);
- a field: an EditText over the whole row, showing its text, else its hint;
- a button: a Button, inset like a row's text;
- a text: a TextView, inset the same way;
- a list: a scrollable ListView over every remaining row, holding the rows that fit from
  its scroll offset on.
An open long-press menu is a ListView of clickable entries laid over the rows below the
one that was held (above it when there is no room), last in the tree, so it is on top.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from xml.sax.saxutils import quoteattr

import attrs

from .pages import LONG_PRESS_MENU, Item, Page, ScreenState

ROWS = 12


@attrs.frozen(kw_only=True)
class Node:
    """One node of the UI tree, with the attributes a real dump has."""

    cls: str
    package: str
    bounds: tuple[int, int, int, int]  # x1, y1, x2, y2 (x2, y2 exclusive)
    text: str = ""
    resource_id: str = ""
    description: str = ""  # content-desc
    clickable: bool = False
    long_clickable: bool = False
    focusable: bool = False
    focused: bool = False
    scrollable: bool = False
    checkable: bool = False
    checked: bool = False
    enabled: bool = True
    password: bool = False
    hint: bool = False  # an empty field showing its hint (drawn grey; not dumped)
    opens: str | None = None  # what a tap opens ("package/activity")
    gesture: str = ""  # see pages.Item.gesture; "dismiss" closes an open menu
    item: str = ""  # the resource id of the page item this node acts for (not dumped)
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
    """The laid-out screen of one state: its tree and what input handling needs to know."""

    state: ScreenState
    width: int
    height: int
    root: Node
    row_height: int
    scroll_limit: int = 0  # the largest scroll offset of the page's list (0 without one)

    @property
    def component(self) -> str:
        return self.state.component

    def tap_target(self, x: int, y: int) -> Node | None:
        """The innermost clickable node under (x, y) (later nodes lie on top), or None."""
        return self._innermost(x, y, lambda node: node.clickable)

    def long_press_target(self, x: int, y: int) -> Node | None:
        return self._innermost(x, y, lambda node: node.long_clickable)

    def scroll_target(self, x: int, y: int) -> Node | None:
        return self._innermost(x, y, lambda node: node.scrollable)

    def menu_open(self) -> bool:
        return any(node.gesture == "dismiss" for node in self.root.walk())

    def _innermost(self, x: int, y: int, wanted: Callable[[Node], bool]) -> Node | None:
        hits = [node for node in self.root.walk() if wanted(node) and node.contains(x, y)]
        return hits[-1] if hits else None


def lay_out(page: Page, state: ScreenState, width: int, height: int) -> Screen:
    """Lay `page` out on a `width`x`height` screen (already rotated)."""
    package = state.component.split("/")[0]
    row = height // ROWS

    def inset(top: int) -> tuple[int, int, int, int]:
        return width // 20, top + row // 4, width - width // 20, top + row - row // 4

    children = [
        Node(
            cls="android.widget.TextView",
            package=package,
            bounds=(0, 0, width, row),
            text=page.title,
            resource_id=f"{package}:id/toolbar_title",
        )
    ]
    rows_of: dict[str, int] = {}
    scroll_limit = 0
    for index, item in enumerate(page.items[: ROWS - 1]):
        top = row * (index + 1)
        rows_of[item.resource_id] = index + 1
        if item.kind == "list":
            visible = ROWS - 1 - index
            scroll_limit = max(0, len(item.rows) - visible)
            children.append(_list(item, package, state, width, top, row, visible, min(state.scroll, scroll_limit)))
            break
        children.append(_item(item, package, state, (0, top, width, top + row), inset(top)))
    if state.menu is not None and state.menu in rows_of:
        children.append(_menu(package, rows_of[state.menu], width, row))
    root = Node(
        cls="android.widget.FrameLayout", package=package, bounds=(0, 0, width, height), children=tuple(children)
    )
    return Screen(state=state, width=width, height=height, root=root, row_height=row, scroll_limit=scroll_limit)


def _item(
    item: Item,
    package: str,
    state: ScreenState,
    whole: tuple[int, int, int, int],
    inner: tuple[int, int, int, int],
) -> Node:
    if item.kind == "field":
        typed = state.fields.get(item.resource_id, "")
        return Node(
            cls="android.widget.EditText",
            package=package,
            bounds=whole,
            text=typed or item.text,
            hint=not typed,
            resource_id=item.resource_id,
            clickable=True,
            long_clickable=True,
            focusable=True,
            focused=state.focused == item.resource_id,
            item=item.resource_id,
        )
    if item.kind == "button":
        return Node(
            cls="android.widget.Button",
            package=package,
            bounds=inner,
            text=item.text,
            resource_id=item.resource_id,
            clickable=True,
            focusable=True,
            opens=item.opens,
            item=item.resource_id,
        )
    text = Node(
        cls="android.widget.TextView", package=package, text=item.text, resource_id=item.resource_id, bounds=inner
    )
    if item.kind == "text":
        return text
    return Node(
        cls="android.widget.LinearLayout",
        package=package,
        bounds=whole,
        clickable=True,
        long_clickable=item.gesture == "menu",
        focusable=True,
        opens=item.opens,
        gesture=item.gesture,
        item=item.resource_id,
        children=(text,),
    )


def _list(
    item: Item, package: str, state: ScreenState, width: int, top: int, row: int, visible: int, offset: int
) -> Node:
    rows = []
    for slot, text in enumerate(item.rows[offset : offset + visible]):
        y = top + slot * row
        label = Node(
            cls="android.widget.TextView",
            package=package,
            text=text,
            resource_id=f"{package}:id/item",
            bounds=(width // 20, y + row // 4, width - width // 20, y + row - row // 4),
        )
        rows.append(
            Node(
                cls="android.widget.LinearLayout",
                package=package,
                bounds=(0, y, width, y + row),
                clickable=True,
                focusable=True,
                children=(label,),
            )
        )
    return Node(
        cls="android.widget.ListView",
        package=package,
        bounds=(0, top, width, top + visible * row),
        resource_id=item.resource_id,
        focusable=True,
        scrollable=True,
        children=tuple(rows),
    )


def _menu(package: str, held_row: int, width: int, row: int) -> Node:
    count = len(LONG_PRESS_MENU)
    first = held_row + 1 if held_row + 1 + count <= ROWS else held_row - count
    x1, x2 = width // 4, width - width // 10
    entries = tuple(
        Node(
            cls="android.widget.TextView",
            package=package,
            text=text,
            resource_id="android:id/title",
            bounds=(x1, (first + n) * row, x2, (first + n + 1) * row),
            clickable=True,
            focusable=True,
            gesture="dismiss",
        )
        for n, text in enumerate(LONG_PRESS_MENU)
    )
    return Node(
        cls="android.widget.ListView",
        package=package,
        bounds=(x1, first * row, x2, (first + count) * row),
        children=entries,
    )


# --- uiautomator dump ------------------------------------------------------------------


def hierarchy_xml(screen: Screen) -> bytes:
    """The screen as `uiautomator dump` writes it: one line, no trailing newline."""
    parts = [
        f"<?xml version='1.0' encoding='UTF-8' standalone='yes' ?><hierarchy rotation=\"{screen.state.rotation}\">"
    ]
    _node_xml(screen.root, 0, parts)
    parts.append("</hierarchy>")
    return "".join(parts).encode()


def _node_xml(node: Node, index: int, parts: list[str]) -> None:
    x1, y1, x2, y2 = node.bounds
    flags = {
        "checkable": node.checkable,
        "checked": node.checked,
        "clickable": node.clickable,
        "enabled": node.enabled,
        "focusable": node.focusable,
        "focused": node.focused,
        "scrollable": node.scrollable,
        "long-clickable": node.long_clickable,
        "password": node.password,
        "selected": False,
    }
    attributes = [
        ("index", str(index)),
        ("text", node.text),
        ("resource-id", node.resource_id),
        ("class", node.cls),
        ("package", node.package),
        ("content-desc", node.description),
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
