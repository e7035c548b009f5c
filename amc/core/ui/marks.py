"""Where the numbered boxes of a set-of-marks screenshot go.

Each element of the compact list gets a mark: its bounds scaled onto the output image, and a
label (its index) in a small box at the element's top-left corner. The label sits inside the
element when it fits there; otherwise just above it (a small icon keeps its face visible),
or, at the image's top edge, inside from the corner anyway. Wherever it would go, it is
shifted to lie inside the image. The drawing itself (Pillow) belongs to the Host Agent; this
module only computes the rectangles, in the image's pixels, right and bottom exclusive.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import attrs

from amc.core.ui.tree import Bounds, Element

PADDING = 2  # pixels between a label's text and its box, on each side


@attrs.frozen
class Mark:
    """The mark of element `index`: its `box` on the image, and its `label` drawn in `label_box`."""

    index: int
    box: Bounds
    label: str
    label_box: Bounds


def layout(
    elements: Sequence[Element], *, width: int, height: int, scale: float, char_width: int, line_height: int
) -> tuple[Mark, ...]:
    """One mark per element, in order.

    Args:
        elements: the compact list (screen coordinates).
        width, height: the output image's size in pixels.
        scale: image pixels per screen pixel (the screenshot's `scale`).
        char_width, line_height: the label font's advance and line height, in image pixels.

    Raises:
        ValueError: a size, the scale or a font measure is not positive.
    """
    if min(width, height, char_width, line_height) <= 0 or scale <= 0:
        raise ValueError("the image size, the scale and the font measures must be positive")
    return tuple(_mark(element, width, height, scale, char_width, line_height) for element in elements)


def _mark(element: Element, width: int, height: int, scale: float, char_width: int, line_height: int) -> Mark:
    left, top, right, bottom = element.bounds
    # Outward rounding: an element keeps at least a pixel however small the scale.
    box = (
        _clip(math.floor(left * scale), width),
        _clip(math.floor(top * scale), height),
        _clip(math.ceil(right * scale), width),
        _clip(math.ceil(bottom * scale), height),
    )
    label = str(element.index)
    label_width = min(len(label) * char_width + 2 * PADDING, width)
    label_height = min(line_height + 2 * PADDING, height)
    x, y = box[0], box[1]
    fits_inside = box[2] - box[0] >= label_width and box[3] - box[1] >= label_height
    if not fits_inside and y >= label_height:
        y -= label_height  # above the element, its left edges in line
    x = min(x, width - label_width)
    y = min(y, height - label_height)
    return Mark(index=element.index, box=box, label=label, label_box=(x, y, x + label_width, y + label_height))


def _clip(value: int, limit: int) -> int:
    return max(0, min(value, limit))
