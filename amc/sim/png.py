"""Reading a PNG's size, for tests and tools that check simulated screenshots.

A PNG's signature puts 0x0A at byte 5, which is what ppadb's `screencap()` checks before
deciding not to rewrite CRLF (specs/adb.md §1.3); `drawing` writes the PNGs themselves.
"""

from __future__ import annotations

import struct

SIGNATURE = b"\x89PNG\r\n\x1a\n"


def png_size(data: bytes) -> tuple[int, int]:
    """Return (width, height) from a PNG's IHDR; ValueError if `data` is not a PNG."""
    if not data.startswith(SIGNATURE) or data[12:16] != b"IHDR":
        raise ValueError("not a PNG")
    width, height = struct.unpack(">II", data[16:24])
    return width, height
