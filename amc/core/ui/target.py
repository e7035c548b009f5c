"""A step's `target`: which element of the screen an action is about (specs/protocol.md, Selectors).

    {"text": "Log in"}                       the element whose text is exactly "Log in"
    {"text_contains": "log"}                 text containing "log", ignoring case
    {"resource_id": "login"}                 resource-id "login", or "<package>:id/login"
    {"description": "Navigate up"}           content-desc exactly
    {"class": "EditText"}                    class, in full or its last component
    {"index": 3}                             element [3] of this attempt's last observation
    ... each may add "nth": k                the k-th match (0-based) in document order

Exactly one key selects; `nth` only picks among its matches (so an index takes none). This
module reads the wire form and says what is wrong with it in one sentence; matching a
selector against a screen is `amc.core.ui.selectors`.
"""

from __future__ import annotations

from typing import Any

import attrs

KEYS = ("text", "text_contains", "resource_id", "description", "class", "index")
MAX_VALUE = 4_096
MAX_INDEX = 100_000


class SelectorError(ValueError):
    """A `target` that is not a selector; the message is one sentence naming what is wrong."""


@attrs.frozen
class Selector:
    """One selector: `key` is one of `KEYS`; `value` a string, or an int for `index`."""

    key: str
    value: str | int
    nth: int | None = None

    @property
    def by_index(self) -> bool:
        return self.key == "index"

    def describe(self) -> str:
        """How a reason names it: `text "Log in"`, `element [3]`, `class "EditText" (nth 2)`."""
        said = f"element [{self.value}]" if self.by_index else f'{self.key.replace("_", " ")} "{self.value}"'
        return said if self.nth is None else f"{said} (nth {self.nth})"

    def to_json(self) -> dict[str, Any]:
        raw: dict[str, Any] = {self.key: self.value}
        if self.nth is not None:
            raw["nth"] = self.nth
        return raw


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def parse_target(raw: Any) -> Selector:
    """The `Selector` a step's `target` argument names, or `SelectorError`."""
    if not isinstance(raw, dict):
        raise SelectorError(f"target must be an object with one of {', '.join(KEYS)}")
    unknown = sorted(set(raw) - set(KEYS) - {"nth"})
    if unknown:
        raise SelectorError(f"target has an unknown key {unknown[0]!r}; a selector uses one of {', '.join(KEYS)}")
    keys = [key for key in KEYS if key in raw]
    if not keys:
        raise SelectorError(f"target is empty; give one of {', '.join(KEYS)}")
    if len(keys) > 1:
        raise SelectorError(f"target gives both {keys[0]!r} and {keys[1]!r}; a selector uses exactly one key")
    key = keys[0]
    value = raw[key]
    if key == "index":
        if not _is_int(value) or not 0 <= value <= MAX_INDEX:
            raise SelectorError(f"target.index must be an integer in 0..{MAX_INDEX}")
    elif not isinstance(value, str) or not value or len(value) > MAX_VALUE:
        raise SelectorError(f"target.{key} must be a non-empty string of at most {MAX_VALUE} characters")
    nth = raw.get("nth")
    if nth is not None and (not _is_int(nth) or not 0 <= nth <= MAX_INDEX):
        raise SelectorError(f"target.nth must be an integer in 0..{MAX_INDEX} (0 is the first match)")
    if nth is not None and key == "index":
        raise SelectorError("target.nth does not go with target.index, which names one element already")
    return Selector(key=key, value=value, nth=nth)
