"""The screen drawn with Pillow, so that a person or a vision model can read which screen it is.

Every node of the UI tree gets its outline and its text, in Pillow's bundled default
font (no system fonts): the title bar is dark with white text; rows, lists and text are
outlined on a light background tinted by the foreground activity; an EditText is a white
box (a thick blue outline when focused; its hint grey); a Button is filled blue; an open menu is a white
box drawn last. Equal trees give equal frames.

Frames are cached per tree (the tree is a frozen value), so a screen that does not
change costs its drawing and its PNG compression once (bench/sim_frames.py measures both). The two outputs of `screencap`:
- `png()`: what `screencap -p` writes;
- `raw()`: what `screencap` without `-p` writes: a header of little-endian 32-bit words
  (width, height, format 1 = RGBA_8888, then, from sdk 28 on, the colorspace, 1 = sRGB;
  the sdk boundary is assumed, not checked on a device), then width*height*4 bytes RGBA.
"""

from __future__ import annotations

import functools
import hashlib
import io
import struct

from PIL import Image, ImageDraw, ImageFont

from .layout import Node, Screen

RGBA_8888 = 1
SRGB = 1
COLORSPACE_SDK = 28  # the first sdk whose raw header carries the colorspace word (assumed)

TITLE_BAR = (32, 33, 36)
INK = (33, 33, 33)
OUTLINE = (120, 124, 130)
ACCENT = (26, 115, 232)
WHITE = (255, 255, 255)
HINT = (128, 134, 139)


def png(screen: Screen) -> bytes:
    """The screen as a PNG (8-bit RGB)."""
    return _png(screen.root, screen.width, screen.height)


def raw(screen: Screen, sdk: int) -> bytes:
    """The screen as `screencap` writes it without `-p`: header, then RGBA pixels."""
    return _raw(screen.root, screen.width, screen.height, sdk >= COLORSPACE_SDK)


@functools.lru_cache(maxsize=64)
def _png(root: Node, width: int, height: int) -> bytes:
    out = io.BytesIO()
    # Level 3: the flat images compress almost as well as at the default (6), in half the time.
    _image(root, width, height).save(out, format="PNG", compress_level=3)
    return out.getvalue()


def rgb(screen: Screen) -> bytes:
    """The screen as packed 8-bit RGB pixels (a video frame, for `screenrecord`)."""
    return _rgb(screen.root, screen.width, screen.height)


@functools.lru_cache(maxsize=2)  # 8 MB each: a recording asks for the same frame while the screen stands still
def _rgb(root: Node, width: int, height: int) -> bytes:
    return _image(root, width, height).tobytes("raw", "RGB")


@functools.lru_cache(maxsize=2)  # 8-10 MB each: only the latest frames (a live view asks again and again)
def _raw(root: Node, width: int, height: int, colorspace: bool) -> bytes:
    words = [width, height, RGBA_8888] + ([SRGB] if colorspace else [])
    pixels = _image(root, width, height).tobytes("raw", "RGBX")  # X is written as 255: opaque
    return struct.pack(f"<{len(words)}I", *words) + pixels


@functools.lru_cache(maxsize=8)
def _image(root: Node, width: int, height: int) -> Image.Image:
    """The frame of one tree. Callers only read it (it is shared through the cache)."""
    image = Image.new("RGB", (width, height), _tint(root))
    draw = ImageDraw.Draw(image)
    row = max(1, height // 12)
    font = _font(max(8, row * 3 // 10))
    line = max(1, row // 60)
    for node in root.walk():
        if node is root:
            continue
        _node(draw, node, font, line)
    return image


def _node(draw: ImageDraw.ImageDraw, node: Node, font: ImageFont.FreeTypeFont | ImageFont.ImageFont, line: int) -> None:
    x1, y1, x2, y2 = node.bounds
    box = (x1, y1, x2 - 1, y2 - 1)
    ink = INK
    if node.resource_id.endswith(":id/toolbar_title"):
        draw.rectangle(box, fill=TITLE_BAR)
        ink = WHITE
    elif node.cls == "android.widget.EditText":
        draw.rectangle(
            box, fill=WHITE, outline=ACCENT if node.focused else OUTLINE, width=line * (3 if node.focused else 1)
        )
    elif node.cls == "android.widget.Button":
        draw.rounded_rectangle(box, radius=(y2 - y1) // 4, fill=ACCENT)
        ink = WHITE
    elif node.gesture == "dismiss" or (node.cls == "android.widget.ListView" and not node.scrollable):
        draw.rectangle(box, fill=WHITE, outline=INK, width=line * 2)  # a menu and its entries, on top
    else:
        draw.rectangle(box, outline=OUTLINE, width=line)
    if node.text:
        inset = max(2, (y2 - y1) // 8)
        draw.text((x1 + inset, (y1 + y2) // 2), node.text, fill=ink, font=font, anchor="lm")


@functools.lru_cache(maxsize=16)
def _font(size: int) -> ImageFont.FreeTypeFont | ImageFont.ImageFont:
    return ImageFont.load_default(size=size)


def _tint(root: Node) -> tuple[int, int, int]:
    """A light background that differs between activities (by the title's text)."""
    title = next((node.text for node in root.children if node.resource_id.endswith(":id/toolbar_title")), "")
    digest = hashlib.sha256(title.encode()).digest()
    return 215 + digest[0] % 40, 215 + digest[1] % 40, 215 + digest[2] % 40
