"""Which element an action is about, from a tool's flat arguments: an index, a selector, or a point.

A model calls `tap(index=3)`, `tap(text="Log in")`, `tap(resource_id="login", nth=1)` or
`tap(x=540, y=1200)`. This module only turns those arguments into the action's wire form
(`{"target": {...}}` or `{"x", "y"}`, specs/protocol.md, Selectors) and says in one sentence what
is wrong with them. It resolves nothing: the Host Agent finds the element on a fresh UI dump as
the action runs, so the screen cannot change between finding and acting.
"""

from __future__ import annotations

from typing import Annotated

from mcp.server.mcpserver.exceptions import ToolError
from pydantic import Field

from amc.core.ui.target import SelectorError, parse_target

from .api import Json

# The selector keys a tool takes, as the wire names them (`class` is `class_name` in Python).
SELECTOR_KEYS = ("text", "text_contains", "resource_id", "description", "class")

Index = Annotated[
    int | None,
    Field(
        ge=0,
        description="The element's number [n] in the element list of your last observe (or ui_tree) in this "
        "session. Refused if the screen changed since: observe again.",
    ),
]
Text = Annotated[str | None, Field(description='The element whose text is exactly this, e.g. "Log in".')]
TextContains = Annotated[
    str | None, Field(description="The element whose text or description contains this, ignoring case.")
]
ResourceId = Annotated[
    str | None,
    Field(description="The element with this resource-id, in full (com.example.app:id/login) or after ':id/' (login)."),
]
Description = Annotated[str | None, Field(description="The element whose content description is exactly this.")]
ClassName = Annotated[
    str | None,
    Field(
        validation_alias="class",
        description="The element of this class, in full (android.widget.EditText) or its last part (EditText).",
    ),
]
Nth = Annotated[
    int | None,
    Field(ge=0, description="When several elements match the selector: which one, 0 = the first in screen order."),
]
Coordinate = Annotated[
    int | None, Field(ge=0, le=100000, description="Pixels from the left (x) or top (y) of the screen.")
]


def selector(
    tool: str,
    *,
    index: int | None = None,
    text: str | None = None,
    text_contains: str | None = None,
    resource_id: str | None = None,
    description: str | None = None,
    class_name: str | None = None,
    nth: int | None = None,
) -> Json | None:
    """The `target` object the arguments name, None when they name none; `ToolError` when they name
    more than one element or say it badly (the same sentence the server would answer)."""
    given: Json = {
        key: value
        for key, value in zip(
            ("index", *SELECTOR_KEYS), (index, text, text_contains, resource_id, description, class_name), strict=True
        )
        if value is not None
    }
    if len(given) > 1:
        first, second = list(given)[:2]
        raise ToolError(
            f"{tool} got both {first} and {second}: name the element one way only "
            f"(use nth to pick among several matches of one selector)."
        )
    if not given:
        if nth is not None:
            raise ToolError(
                f"{tool} got nth without a selector: nth picks among the matches of "
                f"{_listed(SELECTOR_KEYS, 'or')}, so give one of them too."
            )
        return None
    if nth is not None:
        given["nth"] = nth
    try:
        return parse_target(given).to_json()
    except SelectorError as error:
        raise ToolError(f"{tool}: {error}.") from None


def element_or_point(
    tool: str,
    *,
    x: int | None,
    y: int | None,
    index: int | None,
    text: str | None,
    text_contains: str | None,
    resource_id: str | None,
    description: str | None,
    class_name: str | None,
    nth: int | None,
) -> Json:
    """The action's arguments that say where it acts: `{"target": ...}` or `{"x", "y"}`, exactly one."""
    target = selector(
        tool,
        index=index,
        text=text,
        text_contains=text_contains,
        resource_id=resource_id,
        description=description,
        class_name=class_name,
        nth=nth,
    )
    point = (x, y) != (None, None)
    if target is not None and point:
        raise ToolError(
            f"{tool} got both an element and x,y: give the element (index or a selector) or the point, not both."
        )
    if target is not None:
        return {"target": target}
    if x is None or y is None:
        if point:
            raise ToolError(f"{tool} got {'x' if y is None else 'y'} alone: a point needs both x and y.")
        raise ToolError(
            f"{tool} needs to know where: give index (an element [n] from observe), or one of "
            f"{_listed(SELECTOR_KEYS, 'or')}, or x and y."
        )
    return {"x": x, "y": y}


def _listed(names: tuple[str, ...], last: str) -> str:
    return f"{', '.join(names[:-1])} {last} {names[-1]}"
