"""What changed between two screens' compact lists: added, removed and changed elements.

Elements carry no identity across dumps, so the diff pairs them in three passes, each over
what the passes before left unpaired, pairing the k-th occurrence of a key in the earlier
list with its k-th occurrence in the later one:

1. everything but the index equal: the same element, unchanged (perhaps moved in the list
   because something above it came or went);
2. same class, resource-id, text and content-desc: the same element with other bounds or
   flags (moved, checked, focused...): `changed`;
3. same class and a non-empty resource-id: the same view showing another text or
   description ("Loading…" became "Ready"): `changed`.

What is left unpaired is `removed` (from `before`) or `added` (to `after`). The passes treat
both sides alike, so `diff(b, a)` is `diff(a, b)` with added and removed swapped and each
changed pair turned round.
"""

from __future__ import annotations

import operator
from collections import defaultdict
from collections.abc import Hashable
from typing import Any

import attrs

from amc.core.ui.tree import Element, Screen


@attrs.frozen
class TreeDiff:
    """`added` in the later screen's order, `removed` in the earlier's, `changed` as (before, after) pairs."""

    added: tuple[Element, ...]
    removed: tuple[Element, ...]
    changed: tuple[tuple[Element, Element], ...]

    @property
    def empty(self) -> bool:
        return not (self.added or self.removed or self.changed)

    def to_json(self) -> dict[str, Any]:
        """`{"added": [ELEMENT...], "removed": [ELEMENT...], "changed": [{"before": E, "after": E}...]}`."""
        return {
            "added": [element.to_json() for element in self.added],
            "removed": [element.to_json() for element in self.removed],
            "changed": [{"before": old.to_json(), "after": new.to_json()} for old, new in self.changed],
        }


def diff(before: Screen | None, after: Screen) -> TreeDiff:
    """What changed from `before` to `after`; with no `before`, every element of `after` is added."""
    if before is None:
        return TreeDiff(added=after.elements, removed=(), changed=())
    old, new = before.elements, after.elements
    old_left, new_left = list(range(len(old))), list(range(len(new)))  # positions not paired yet
    changed: list[tuple[int, int]] = []
    for key, is_change in ((_everything_but_index, False), (_identity, True), (_view, True)):
        pairs = _pair([(i, key(old[i])) for i in old_left], [(j, key(new[j])) for j in new_left])
        old_paired, new_paired = {i for i, _ in pairs}, {j for _, j in pairs}
        old_left = [i for i in old_left if i not in old_paired]
        new_left = [j for j in new_left if j not in new_paired]
        if is_change:
            changed += pairs
    return TreeDiff(
        added=tuple(new[j] for j in new_left),
        removed=tuple(old[i] for i in old_left),
        changed=tuple((old[i], new[j]) for i, j in sorted(changed, key=lambda pair: pair[1])),
    )


def _pair(old: list[tuple[int, Hashable | None]], new: list[tuple[int, Hashable | None]]) -> list[tuple[int, int]]:
    """Positions paired: the k-th of `old` with a key and the k-th of `new` with that key (None pairs nothing)."""
    waiting: defaultdict[Hashable, list[int]] = defaultdict(list)
    for position, key in old:
        if key is not None:
            waiting[key].append(position)
    pairs = []
    taken: defaultdict[Hashable, int] = defaultdict(int)
    for position, key in new:
        if key is None or taken[key] >= len(waiting[key]):
            continue
        pairs.append((waiting[key][taken[key]], position))
        taken[key] += 1
    return pairs


_BUT_INDEX = operator.attrgetter(*(field.name for field in attrs.fields(Element) if field.name != "index"))


def _everything_but_index(element: Element) -> Hashable:
    return _BUT_INDEX(element)


def _identity(element: Element) -> Hashable:
    return (element.cls, element.resource_id, element.text, element.description)


def _view(element: Element) -> Hashable | None:
    return (element.cls, element.resource_id) if element.resource_id else None
