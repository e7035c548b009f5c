"""Which element of a screen a selector names, and the sentence to say when none does.

Matching (specs/protocol.md, Selectors) runs over `Screen.nodes`, every node with area on the
screen, in document order:

    text           node.text == value
    text_contains  value, casefolded, is a substring of the casefolded text or content-desc
    resource_id    node.resource_id == value, or it ends in ":id/" + value ("login": "com.example.app:id/login")
    description    node.description (content-desc) == value
    class          node.cls == value, or its last dotted component == value

Several matches: the first in document order (as Maestro does), or the `nth` (0-based).

`{"index": n}` is different: it names element [n] of the compact list the caller saw in its
last observation. It resolves only against a fresh dump with the same fingerprint as that
observation, so an index never lands on whatever moved into its place since.
"""

from __future__ import annotations

from collections.abc import Callable

import attrs

from amc.core.ui.target import Selector
from amc.core.ui.tree import Element, Screen, quoted

NO_OBSERVATION = "target.index needs an earlier observation (screenshot or ui_tree) in this attempt; there is none"
SCREEN_CHANGED = "the screen changed since the last observation; observe again before acting by index"
EXCERPT_LABEL = 40  # characters of one label in an excerpt; longer ones end in "…"


@attrs.frozen
class Found:
    """The element a selector names, and the point to act on: its centre, cut to the screen."""

    element: Element
    point: tuple[int, int]


@attrs.frozen
class NotFound:
    """No element: `reason` is one sentence for the step's outcome."""

    reason: str


def find_all(selector: Selector, screen: Screen) -> tuple[Element, ...]:
    """Every node the selector's key and value match, in document order (`nth` is not applied).

    Raises:
        ValueError: an index selector; an index names an observation's element, see `resolve`.
    """
    return tuple(node for node in screen.nodes if _matcher(selector)(node))


def resolve(selector: Selector, fresh: Screen, observed: Screen | None) -> Found | NotFound:
    """The one element `selector` names on `fresh` (a dump taken just now), or why there is none.

    `observed` is the attempt's last observation (screenshot or ui_tree); only an index uses it.
    """
    nth = selector.nth or 0
    if isinstance(selector.value, int):
        return _by_index(selector.value, nth, fresh, observed)
    matches = find_all(selector, fresh)
    if nth < len(matches):
        return _found(fresh, matches[nth])
    if matches:
        plain = attrs.evolve(selector, nth=None).describe()
        verb = "matches" if len(matches) == 1 else "match"
        return NotFound(f"no element matches {selector.describe()}: {_count(len(matches))} {verb} {plain}")
    return NotFound(f"no element matches {selector.describe()}; {excerpt(fresh)}")


def _by_index(index: int, nth: int, fresh: Screen, observed: Screen | None) -> Found | NotFound:
    if observed is None:
        return NotFound(NO_OBSERVATION)
    if observed.fingerprint != fresh.fingerprint:
        return NotFound(SCREEN_CHANGED)
    if index >= len(fresh.elements):
        return NotFound(f"there is no element [{index}]: the last observation listed {_count(len(fresh.elements))}")
    if nth > 0:
        return NotFound(f"element [{index}] has no nth {nth}: an index names one element, so only nth 0 can match")
    return _found(fresh, fresh.elements[index])


def excerpt(screen: Screen, limit: int = 12) -> str:
    """What the screen shows, briefly: `the screen showed: "A", "B", ... (n elements)`.

    The labels are the compact elements' texts (their descriptions where they have no text),
    each once, in document order, at most `limit` of them.

    Raises:
        ValueError: `limit` is below 1.
    """
    if limit < 1:
        raise ValueError("an excerpt shows at least one label")
    labels: list[str] = []
    for element in screen.elements:
        label = element.text or element.description
        if label and label not in labels:
            labels.append(label)
    count = _count(len(screen.elements))
    if not labels:
        return f"the screen showed no text ({count})"
    shown = ", ".join(quoted(_cut(label)) for label in labels[:limit])
    more = ", ..." if len(labels) > limit else ""
    return f"the screen showed: {shown}{more} ({count})"


def _matcher(selector: Selector) -> Callable[[Element], bool]:
    value = selector.value
    if not isinstance(value, str):
        raise ValueError(f"{selector.describe()} is an index; resolve it against an observation")
    match selector.key:
        case "text":
            return lambda node: node.text == value
        case "text_contains":
            folded = value.casefold()
            return lambda node: folded in node.text.casefold() or folded in node.description.casefold()
        case "resource_id":
            suffix = ":id/" + value
            return lambda node: node.resource_id == value or node.resource_id.endswith(suffix)
        case "description":
            return lambda node: node.description == value
        case "class":
            return lambda node: value in (node.cls, node.short_class)
    raise ValueError(f"unknown selector key {selector.key!r}")


def _found(screen: Screen, element: Element) -> Found:
    # The centre of the part on the screen: the element's own centre when it is all on it.
    left, top, right, bottom = screen.visible_part(element)
    return Found(element=element, point=((left + right) // 2, (top + bottom) // 2))


def _count(n: int) -> str:
    return f"{n} element" if n == 1 else f"{n} elements"


def _cut(label: str) -> str:
    return label if len(label) <= EXCERPT_LABEL else label[: EXCERPT_LABEL - 1] + "…"
