"""`screenrecord [--time-limit N] [--bit-rate N] [--size WxH] FILE`: a real mp4 of the screen.

As on a device, the tool records until its time limit (default and most: 180 s) or a signal:
SIGINT, SIGTERM or a hangup make it finish the file (its index written, so it plays), and
only then does the file appear in the device's files. SIGKILL leaves nothing, as a real
recording killed so is unplayable. The frames are the screens the simulator draws
(`drawing.rgb`), FPS per second at the size the screen had when the recording began (a later
rotation is scaled into it); `--bit-rate` and `--size` are accepted and ignored.
"""

from __future__ import annotations

import time

from PIL import Image

from .. import drawing
from ..invocation import Invocation
from ..process import Hangup, Killed
from ..video import Mp4Writer

FPS = 4
MAX_TIME_LIMIT = 180
_FINISHING = ("SIGINT", "SIGTERM", "SIGHUP")
_USAGE = "usage: screenrecord [--time-limit N] [--bit-rate N] [--size WxH] FILE\n"


def screenrecord(inv: Invocation) -> int:
    limit, path = _arguments(inv)
    if path is None:
        inv.err(_USAGE)
        return 1
    if not 1 <= limit <= MAX_TIME_LIMIT:
        inv.err(f"Time limit {limit} is out of range [1,{MAX_TIME_LIMIT}]\n")
        return 1
    first = inv.device.screen()
    size = (first.width, first.height)
    writer = Mp4Writer(size, FPS)
    started = time.monotonic()
    try:
        tick = 0
        while True:
            writer.add(_frame(inv, size))
            tick += 1
            remaining = started + tick / FPS - time.monotonic()
            if tick / FPS >= limit:
                break
            inv.process.sleep(remaining)
    except (Killed, Hangup) as signal:
        if signal.signal not in _FINISHING:
            writer.discard()
            raise
    except BaseException:
        writer.discard()
        raise
    inv.device.files[path] = writer.close()
    return 0


def _frame(inv: Invocation, size: tuple[int, int]) -> bytes:
    screen = inv.device.screen()
    pixels = drawing.rgb(screen)
    if (screen.width, screen.height) == size:
        return pixels
    return Image.frombytes("RGB", (screen.width, screen.height), pixels).resize(size).tobytes()


def _arguments(inv: Invocation) -> tuple[int, str | None]:
    """(time limit, FILE or None for a usage error)."""
    limit, paths = MAX_TIME_LIMIT, []
    args = iter(inv.args)
    for arg in args:
        if arg in ("--time-limit", "--bit-rate", "--size"):
            value = next(args, None)
            if value is None:
                return limit, None
            if arg == "--time-limit":
                if not value.isdigit():
                    return limit, None
                limit = int(value)
        elif arg.startswith("-"):
            return limit, None
        else:
            paths.append(arg)
    return limit, (paths[0] if len(paths) == 1 else None)


PROGRAMS = {"screenrecord": screenrecord}
