"""Screenshots made on the host (`frames`): raw frames decoded, scaled, encoded, marked."""

from __future__ import annotations

import io
import struct

import pytest
from PIL import Image

from amc.adapters.adb import frames
from amc.adapters.adb.errors import StepFailed
from amc.core.ui.marks import layout
from amc.core.ui.tree import parse_dump

from .helpers import dump_xml

req = pytest.mark.req

RED, GREEN, BLUE = (200, 10, 10), (10, 200, 10), (10, 10, 200)


def pixels(width: int, height: int) -> list[tuple[int, int, int]]:
    """A test card: each pixel's colour depends on where it is."""
    return [(x * 7 % 256, y * 5 % 256, (x + y) % 256) for y in range(height) for x in range(width)]


def colours(image: Image.Image) -> list[tuple[int, int, int]]:
    data = image.convert("RGB").tobytes()
    return [tuple(data[i : i + 3]) for i in range(0, len(data), 3)]


def raw(width: int, height: int, *, header: int = 16, pixel_format: int = 1, alpha: int = 255) -> bytes:
    head = struct.pack("<IIII", width, height, pixel_format, 0)[:header]
    if pixel_format == 3:
        body = b"".join(bytes(p) for p in pixels(width, height))
    else:
        body = b"".join(bytes((*p, alpha)) for p in pixels(width, height))
    return head + body


@req("UI/s11")
@pytest.mark.parametrize("header", [16, 12])
def test_a_raw_frame_with_either_header_decodes_to_its_pixels(header):
    frame = frames.decode_raw(raw(6, 4, header=header))
    assert frame.size == (6, 4) and frame.pixel_format == 1
    assert colours(frame.image) == pixels(6, 4)


@req("UI/s11")
def test_alpha_is_dropped_and_rgbx_and_rgb888_frames_decode_too():
    assert colours(frames.decode_raw(raw(3, 2, alpha=0)).image) == pixels(3, 2)
    assert colours(frames.decode_raw(raw(3, 2, pixel_format=2)).image) == pixels(3, 2)
    assert colours(frames.decode_raw(raw(3, 2, pixel_format=3)).image) == pixels(3, 2)


@req("UI/s11")
# (A 16-byte frame cut by exactly 4 bytes reads as a 12-byte one: length is all there is to go by.)
@pytest.mark.parametrize("cut", [1, 5, 6 * 4 * 4 // 2, 6 * 4 * 4 + 3])
def test_a_truncated_frame_fails_the_step(cut):
    data = raw(6, 4)[:-cut]
    with pytest.raises(StepFailed, match=r"the frame was cut short|fewer than a frame header"):
        frames.decode_raw(data)


def test_a_frame_longer_than_its_header_says_fails_too():
    with pytest.raises(StepFailed, match="cut short"):
        frames.decode_raw(raw(6, 4) + b"\0" * 5)


def test_an_unknown_pixel_format_is_named():
    with pytest.raises(StepFailed, match="pixel format 4"):
        frames.decode_raw(raw(2, 2, pixel_format=4))


def test_a_header_alone_is_not_a_frame():
    with pytest.raises(StepFailed, match="fewer than a frame header"):
        frames.decode_raw(b"\x01\x00")


@req("UI/s11")
@pytest.mark.parametrize(("name", "pillow"), [("png", "PNG"), ("jpeg", "JPEG"), ("webp", "WEBP")])
def test_each_format_encodes_an_image_of_that_format(name, pillow):
    image = frames.decode_raw(raw(40, 30)).image
    data = frames.encode(image, name, 80)
    decoded = Image.open(io.BytesIO(data))
    assert (decoded.format, decoded.size) == (pillow, (40, 30))
    if name == "png":  # lossless
        assert colours(decoded) == pixels(40, 30)


def test_quality_changes_a_lossy_encoding():
    image = frames.decode_raw(raw(64, 64)).image
    assert len(frames.encode(image, "jpeg", 10)) < len(frames.encode(image, "jpeg", 95))


@req("UI/s11")
@pytest.mark.parametrize(("scale", "size"), [(1.0, (100, 60)), (0.5, (50, 30)), (0.33, (33, 20)), (0.1, (10, 6))])
def test_scale_sets_the_image_size(scale, size):
    image = Image.new("RGB", (100, 60), RED)
    assert frames.scaled(image, scale).size == size


def test_half_scale_averages_neighbouring_pixels():
    image = Image.new("RGB", (4, 2), RED)
    image.paste(BLUE, (2, 0, 4, 2))
    assert colours(frames.scaled(image, 0.5)) == [RED, BLUE]


@req("UI/s11")
@pytest.mark.parametrize("scale", [1.0, 0.5, 0.3])
def test_marks_are_drawn_on_the_bounds_of_the_element_list(scale):
    screen = parse_dump(
        dump_xml(
            {"text": "Title", "bounds": (0, 0, 400, 60)},
            {"text": "Log in", "clickable": "true", "bounds": (40, 100, 360, 180)},
            {"resource-id": "com.example.app:id/icon", "bounds": (300, 300, 330, 330)},
            width=400,
            height=600,
        )
    )
    white = (255, 255, 255)
    image = Image.new("RGB", (round(400 * scale), round(600 * scale)), white)
    marks = layout(
        screen.elements,
        width=image.width,
        height=image.height,
        scale=scale,
        char_width=frames.CHAR_WIDTH,
        line_height=frames.LINE_HEIGHT,
    )
    frames.draw_marks(image, marks)
    assert [mark.index for mark in marks] == [element.index for element in screen.elements] == [0, 1, 2]
    for mark, element in zip(marks, screen.elements, strict=True):
        left, top, right, bottom = (round(edge * scale) for edge in element.bounds)
        assert mark.box == (left, top, right, bottom)
        middle = (top + bottom) // 2
        # The box's outline runs along the element's bounds, on the left and right edges ...
        assert image.getpixel((left, middle)) == frames.MARK_COLOUR
        assert image.getpixel((right - 1, middle)) == frames.MARK_COLOUR
        # ... and its number is on a filled label inside the image.
        label_left, label_top, label_right, label_bottom = mark.label_box
        assert 0 <= label_left < label_right <= image.width and 0 <= label_top < label_bottom <= image.height
        label = image.crop(mark.label_box)
        assert frames.LABEL_TEXT in {label.getpixel((x, y)) for x in range(label.width) for y in range(label.height)}
    # Nothing is drawn away from the marks.
    assert image.getpixel((image.width - 1, image.height - 1)) == white
