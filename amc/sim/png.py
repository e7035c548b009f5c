"""A minimal PNG encoder for simulated screenshots (zlib + struct, no imaging library).

The image is a real, valid 8-bit RGB PNG. Its signature puts 0x0A at byte 5, which is
what ppadb's `screencap()` checks before deciding not to rewrite CRLF (specs/adb.md §1.3).
"""

from __future__ import annotations

import functools
import struct
import zlib

SIGNATURE = b"\x89PNG\r\n\x1a\n"


def _chunk(kind: bytes, body: bytes) -> bytes:
    crc = zlib.crc32(kind + body) & 0xFFFFFFFF
    return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", crc)


Box = tuple[int, int, int, int, tuple[int, int, int]]  # x1, y1, x2, y2 (exclusive), colour


@functools.lru_cache(maxsize=64)
def render_screen(width: int, height: int, background: tuple[int, int, int], boxes: tuple[Box, ...] = ()) -> bytes:
    """Return a PNG of `width`x`height`: filled boxes over a plain background (later boxes on top).

    Results are cached because a full-HD frame costs tens of milliseconds to compress.
    """
    lines: dict[tuple[Box, ...], bytes] = {}
    raw = bytearray()
    for y in range(height):
        covering = tuple(box for box in boxes if box[1] <= y < box[3])
        line = lines.get(covering)
        if line is None:
            pixels = bytearray(bytes(background) * width)
            for x1, _, x2, _, colour in covering:
                x1, x2 = max(0, x1), min(width, x2)
                if x2 > x1:
                    pixels[3 * x1 : 3 * x2] = bytes(colour) * (x2 - x1)
            line = lines[covering] = b"\x00" + bytes(pixels)  # each scanline starts with filter type 0 (None)
        raw += line
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)  # 8-bit RGB
    return SIGNATURE + _chunk(b"IHDR", header) + _chunk(b"IDAT", zlib.compress(bytes(raw), 6)) + _chunk(b"IEND", b"")


def png_size(data: bytes) -> tuple[int, int]:
    """Return (width, height) from a PNG's IHDR; ValueError if `data` is not a PNG."""
    if not data.startswith(SIGNATURE) or data[12:16] != b"IHDR":
        raise ValueError("not a PNG")
    return struct.unpack(">II", data[16:24])
