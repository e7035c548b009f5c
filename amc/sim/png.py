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


@functools.lru_cache(maxsize=16)
def render_screen(width: int, height: int, background: tuple[int, int, int],
                  banner: tuple[int, int, int]) -> bytes:
    """Return a PNG of `width`x`height`: a banner strip over a plain background.

    The two colours let a test tell screens of different foreground apps apart. Results
    are cached because a full-HD frame costs tens of milliseconds to compress.
    """
    banner_rows = max(1, height // 12)
    # Each scanline starts with filter type 0 (None).
    banner_line = b"\x00" + bytes(banner) * width
    background_line = b"\x00" + bytes(background) * width
    raw = banner_line * banner_rows + background_line * (height - banner_rows)
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)  # 8-bit RGB
    return (SIGNATURE + _chunk(b"IHDR", header) + _chunk(b"IDAT", zlib.compress(raw, 6))
            + _chunk(b"IEND", b""))


def png_size(data: bytes) -> tuple[int, int]:
    """Return (width, height) from a PNG's IHDR; ValueError if `data` is not a PNG."""
    if not data.startswith(SIGNATURE) or data[12:16] != b"IHDR":
        raise ValueError("not a PNG")
    return struct.unpack(">II", data[16:24])
