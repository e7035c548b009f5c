"""Where set-of-marks labels go (amc.core.ui.marks): inside the image, scaled with the screenshot."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from amc.core.ui.marks import PADDING, Mark, layout
from amc.core.ui.tree import parse_dump
from tests.model.ui_trees import GenTree, texts_xml, trees

req = pytest.mark.req

scales = st.sampled_from([0.1, 0.25, 1 / 3, 0.5, 0.75, 1.0])
fonts = st.tuples(st.integers(1, 12), st.integers(1, 24))


def inside(box: tuple[int, int, int, int], width: int, height: int) -> bool:
    left, top, right, bottom = box
    return 0 <= left <= right <= width and 0 <= top <= bottom <= height


@req("UI/s11")
@given(trees(), scales, fonts)
def test_one_mark_per_element_its_box_scaled_and_every_label_inside_the_image(tree: GenTree, scale, font):
    screen = parse_dump(tree.xml())
    width, height = max(1, round(screen.width * scale)), max(1, round(screen.height * scale))
    marks = layout(screen.elements, width=width, height=height, scale=scale, char_width=font[0], line_height=font[1])
    assert [m.index for m in marks] == [e.index for e in screen.elements]
    assert [m.label for m in marks] == [str(e.index) for e in screen.elements]
    for mark, element in zip(marks, screen.elements):
        assert inside(mark.box, width, height)
        assert inside(mark.label_box, width, height)
        left, top, right, bottom = element.bounds
        # The box is the element's bounds times the scale (rounded outward), cut to the image.
        expected = (
            max(0, math.floor(left * scale)),
            max(0, math.floor(top * scale)),
            min(width, math.ceil(right * scale)),
            min(height, math.ceil(bottom * scale)),
        )
        assert mark.box == expected
        # A label is as wide as its text and padding (unless the image itself is narrower).
        label_width = mark.label_box[2] - mark.label_box[0]
        assert label_width == min(len(mark.label) * font[0] + 2 * PADDING, width)
        assert mark.label_box[3] - mark.label_box[1] == min(font[1] + 2 * PADDING, height)


@req("UI/s11")
@given(trees(), st.sampled_from([0.25, 0.5]), fonts)
def test_boxes_scale_with_the_scale(tree: GenTree, scale, font):
    screen = parse_dump(tree.xml())
    full = layout(
        screen.elements, width=screen.width, height=screen.height, scale=1, char_width=font[0], line_height=font[1]
    )
    small = layout(
        screen.elements,
        width=round(screen.width * scale),
        height=round(screen.height * scale),
        scale=scale,
        char_width=font[0],
        line_height=font[1],
    )
    for big, little in zip(full, small):
        for a, b in zip(big.box, little.box):
            assert abs(a * scale - b) <= 1


@req("UI/s11")
def test_a_label_sits_in_the_top_left_corner_when_it_fits_else_above_and_always_in_the_image():
    screen = parse_dump(texts_xml("Big row", "Second"))
    marks = layout(screen.elements, width=540, height=1200, scale=0.5, char_width=6, line_height=11)
    assert marks[0] == Mark(index=0, box=(0, 0, 540, 50), label="0", label_box=(0, 0, 10, 15))
    assert marks[1].label_box == (0, 50, 10, 65)
    tiny = parse_dump(
        '<hierarchy><node class="a.Frame" bounds="[0,0][1080,2400]">'
        '<node text="x" class="a.Icon" bounds="[1070,600][1080,610]" />'
        '<node text="y" class="a.Icon" bounds="[0,0][10,10]" /></node></hierarchy>'
    )
    above, corner = layout(tiny.elements, width=1080, height=2400, scale=1, char_width=6, line_height=11)
    assert above.label_box == (1070, 585, 1080, 600)  # above the icon, its right edge at the image's
    assert corner.label_box == (0, 0, 10, 15)  # no room above: from the corner, over the icon


def test_bad_measures_are_refused():
    screen = parse_dump(texts_xml("A"))
    with pytest.raises(ValueError):
        layout(screen.elements, width=0, height=10, scale=1, char_width=6, line_height=11)
    with pytest.raises(ValueError):
        layout(screen.elements, width=10, height=10, scale=0, char_width=6, line_height=11)
