"""The simulator's video encoder: the frames it draws, as an mp4 (H.264) that plays.

`screenrecord` (programs/recording.py) feeds it one frame per tick and closes it when the
recording ends; `close()` returns the finished file's bytes. The encoding is ffmpeg's, from
the imageio-ffmpeg package, which bundles an ffmpeg binary: no system ffmpeg is needed.
ffmpeg runs as a child process and is fed raw RGB frames through its stdin, so a recording
holds one frame in memory at a time, whatever its length.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Generator
from pathlib import Path
from typing import Any

import imageio_ffmpeg  # type: ignore[import-untyped]

# Fast and small: the frames are flat UI, and an encoder that keeps up matters more than size.
_OUTPUT = ["-preset", "ultrafast", "-tune", "stillimage", "-movflags", "+faststart"]


class Mp4Writer:
    """Encodes `size` RGB frames at `fps` into an mp4; `close()` finishes it and returns its bytes."""

    def __init__(self, size: tuple[int, int], fps: float):
        self.size = size
        self.frames = 0
        handle, name = tempfile.mkstemp(prefix="amc-sim-rec-", suffix=".mp4")
        os.close(handle)
        self._path = Path(name)
        self._encoder: Generator[Any, bytes | None, None] | None = imageio_ffmpeg.write_frames(
            str(self._path),
            size,
            fps=fps,
            codec="libx264",
            macro_block_size=2,  # yuv420p needs even sides; never resize a phone's frame
            ffmpeg_log_level="error",
            output_params=_OUTPUT,
        )
        self._encoder.send(None)  # starts ffmpeg

    def add(self, rgb: bytes) -> None:
        """One frame: width * height * 3 bytes."""
        assert self._encoder is not None, "the recording was closed"
        self._encoder.send(rgb)
        self.frames += 1

    def close(self) -> bytes:
        """Finish the file (ffmpeg writes the index) and return it."""
        try:
            if self._encoder is not None:
                self._encoder.close()
                self._encoder = None
            return self._path.read_bytes()
        finally:
            self._path.unlink(missing_ok=True)

    def discard(self) -> None:
        """Stop without a file (what SIGKILL leaves of a real recording: nothing playable)."""
        try:
            if self._encoder is not None:
                self._encoder.close()
                self._encoder = None
        finally:
            self._path.unlink(missing_ok=True)
