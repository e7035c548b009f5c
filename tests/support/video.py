"""Decoding an mp4 in tests: the frame count and size ffmpeg reads back (imageio-ffmpeg)."""

from __future__ import annotations

import tempfile
from pathlib import Path

import imageio_ffmpeg


def decode(data: bytes) -> tuple[int, tuple[int, int]]:
    """(how many frames decode, their width and height) of an mp4's bytes."""
    with tempfile.TemporaryDirectory() as directory:
        path = Path(directory) / "video.mp4"
        path.write_bytes(data)
        reader = imageio_ffmpeg.read_frames(str(path))
        meta = reader.__next__()
        count = sum(1 for _ in reader)
    return count, tuple(meta["size"])
