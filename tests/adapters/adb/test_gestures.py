"""The geometry of direction gestures (`gestures`), without a device."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from amc.adapters.adb import gestures
from amc.core.ui.tree import parse_dump

from .helpers import dump_xml

req = pytest.mark.req

boxes = st.tuples(st.integers(0, 2000), st.integers(0, 2000), st.integers(1, 2000), st.integers(1, 2000)).map(
    lambda b: (b[0], b[1], b[0] + b[2], b[1] + b[3])
)


@req("UI/s6")
@given(boxes, st.sampled_from(gestures.DIRECTIONS))
def test_a_swipe_moves_the_finger_its_way_inside_its_area(area, direction):
    left, top, right, bottom = area
    x1, y1, x2, y2 = gestures.swipe_line(area, direction)
    assert all(left <= x < right or left == x == right - 1 for x in (x1, x2))
    assert all(top <= y < bottom or top == y == bottom - 1 for y in (y1, y2))
    dx, dy = x2 - x1, y2 - y1
    moved = {"up": -dy, "down": dy, "left": -dx, "right": dx}[direction]
    assert moved >= 0 and (dx == 0 if direction in ("up", "down") else dy == 0)


@req("UI/s6")
def test_a_scroll_moves_the_finger_against_the_content():
    area = (0, 0, 1000, 2000)
    assert gestures.scroll_line(area, "down") == gestures.swipe_line(area, "up") == (500, 1600, 500, 400)
    assert gestures.scroll_line(area, "right") == gestures.swipe_line(area, "left") == (800, 1000, 200, 1000)


def test_the_scroll_area_is_the_largest_scrollable_element_on_the_screen():
    screen = parse_dump(
        dump_xml(
            {"scrollable": "true", "bounds": (0, 100, 500, 300)},
            {"scrollable": "true", "bounds": (0, 300, 1000, 2600)},
            width=1000,
            height=2000,
        )
    )
    assert gestures.scroll_area(screen) == (0, 300, 1000, 2000), "cut to the screen"
    plain = parse_dump(dump_xml({"text": "x", "bounds": (0, 0, 10, 10)}, width=1000, height=2000))
    assert gestures.scroll_area(plain) == (0, 0, 1000, 2000)
