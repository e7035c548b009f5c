"""Screenshots made on the host: a raw frame from `screencap` decoded, scaled, marked and
encoded with Pillow.

A phone encoding a full-size PNG takes seconds (`screencap -p`); sending the raw pixels and
encoding them here is several times faster, and lets the caller choose the size and format.

Raw frame (`screencap` without -p, AOSP `cmds/screencap`): a little-endian header, then
width*height pixels.
- 16 bytes (Android 9 and later): width, height, pixel format, colour space (u32 each);
- 12 bytes (older): width, height, pixel format.
The two are told apart by the total length, since only one of them makes it add up. Pixel
formats: 1 RGBA_8888 and 2 RGBX_8888 (4 bytes a pixel), 3 RGB_888 (3 bytes); others are
refused by name.

Marks ("set of marks"): a numbered box on each element of the compact list, from
`amc.core.ui.marks.layout`, drawn with Pillow's built-in bitmap font so that no system font
is needed and the label sizes the layout assumed are the sizes drawn.
"""

from __future__ import annotations

import io
import struct
import zlib
from collections.abc import Sequence
from typing import TYPE_CHECKING

import attrs
from PIL import Image, ImageDraw, ImageFont

from .errors import StepFailed

if TYPE_CHECKING:
    from amc.core.ui.marks import Mark

FORMATS = {"png": ("image/png", ".png"), "jpeg": ("image/jpeg", ".jpg"), "webp": ("image/webp", ".webp")}
# pixel format -> (Pillow's raw mode to read it as RGB, bytes a pixel); alpha is dropped.
_PIXEL_FORMATS = {1: ("RGBX", 4), 2: ("RGBX", 4), 3: ("RGB", 3)}
# Pillow's built-in bitmap font: every character is 6 by 11 pixels.
FONT = ImageFont.load_default_imagefont()
CHAR_WIDTH, LINE_HEIGHT = 6, 11
MARK_COLOUR = (255, 0, 110)  # a magenta rarely found in an app's palette
LABEL_TEXT = (255, 255, 255)
# A frame past this is not a phone screen (8K RGBA is 133 MB): refuse rather than hold it.
MAX_FRAME_BYTES = 160 << 20


@attrs.frozen
class Frame:
    """A decoded raw frame (RGB)."""

    image: Image.Image
    pixel_format: int

    @property
    def size(self) -> tuple[int, int]:
        return self.image.size


def decode_raw(data: bytes) -> Frame:
    """The image of a raw `screencap` frame; StepFailed if it is cut short or unknown."""
    if len(data) < 12:
        raise StepFailed(f"screencap sent {len(data)} bytes, fewer than a frame header (device gone mid-transfer?)")
    width, height, pixel_format = struct.unpack_from("<III", data)
    if pixel_format not in _PIXEL_FORMATS:
        raise StepFailed(f"screencap sent pixel format {pixel_format}, which is not RGBA_8888, RGBX_8888 or RGB_888")
    raw_mode, depth = _PIXEL_FORMATS[pixel_format]
    pixels = width * height * depth
    header = next((size for size in (16, 12) if len(data) == size + pixels), None)
    if header is None or width == 0 or height == 0:
        raise StepFailed(
            f"screencap sent {len(data)} bytes for a {width}x{height} frame of {depth}-byte pixels "
            f"(expected {pixels + 16} or {pixels + 12}): the frame was cut short (device gone mid-transfer?)"
        )
    image = Image.frombytes("RGB", (width, height), memoryview(data)[header:], "raw", raw_mode)
    return Frame(image, pixel_format)


def scaled(image: Image.Image, scale: float) -> Image.Image:
    """`image` scaled by `scale` (0.1..1), each side at least one pixel."""
    if scale >= 1:
        return image
    width, height = image.size
    size = (max(1, round(width * scale)), max(1, round(height * scale)))
    if scale == 0.5 and width % 2 == 0 and height % 2 == 0:
        return image.reduce(2)  # a box filter: exact and the fastest path, for the common case
    return image.resize(size, Image.Resampling.BILINEAR, reducing_gap=2.0)


def draw_marks(image: Image.Image, marks: Sequence[Mark]) -> None:
    """Draw each mark's box and its numbered label onto `image` (in place)."""
    canvas = ImageDraw.Draw(image)
    for mark in marks:
        left, top, right, bottom = mark.box
        canvas.rectangle((left, top, right - 1, bottom - 1), outline=MARK_COLOUR, width=2)
    for mark in marks:  # labels after every box, so no box is drawn over a label
        left, top, right, bottom = mark.label_box
        canvas.rectangle((left, top, right - 1, bottom - 1), fill=MARK_COLOUR)
        canvas.text((left + 1, top), mark.label, fill=LABEL_TEXT, font=FONT)


def encode(image: Image.Image, image_format: str, quality: int) -> bytes:
    """`image` as png (fast compression: these are read once), jpeg or webp at `quality`."""
    out = io.BytesIO()
    if image_format == "png":
        # Fast deflate with run-length matching: screens are runs of flat colour, and this
        # was both faster and smaller than the default strategy on them.
        image.save(out, "PNG", compress_level=1, compress_type=zlib.Z_RLE)
    elif image_format == "jpeg":
        image.save(out, "JPEG", quality=quality)
    elif image_format == "webp":
        image.save(out, "WEBP", quality=quality, method=0)
    else:
        raise StepFailed(f"format must be one of {', '.join(FORMATS)}, got {image_format!r}")
    return out.getvalue()
