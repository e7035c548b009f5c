"""The observing actions: `screenshot`, `ui_tree` and `ui_dump`.

Each first waits for the screen to settle (`screen.observe`) unless `settle` is false.

`screenshot` reports the image and the element list of one moment: it dumps, captures the
raw frame, and dumps again; if the two dumps differ, the screen moved during the capture and
it captures again (`"agreed": false` says when it gave up). Two dumps in a row that agree
are also what settling waits for, so a screenshot settles by the same loop, without dumps of
its own before it. The image is encoded on the host (`frames`), with marks drawn from the
element list it reports, so an index read off the image is the index in the output.

`screenshot` and `ui_tree` are the attempt's *observations*: the screen they report is
remembered, and a later `target.index` acts on it. `ui_tree` with `diff` also reports what
changed since the attempt's previous `ui_tree`.
"""

from __future__ import annotations

import time
from typing import Any

from amc.core.ui.diff import diff as tree_diff
from amc.core.ui.marks import layout
from amc.core.ui.settle import SettleWatch, TimedOut

from . import commands as build
from . import frames
from .calls import ActionResult, Call, as_json, flag, number
from .errors import StepFailed
from .screen import SETTLE_INTERVAL, SETTLE_TIMEOUT, Dump, Observation, dump, observe

XML = "application/xml"
CAPTURE_TRIES = 3


def screenshot(call: Call, args: dict[str, Any]) -> ActionResult:
    scale = number(args, "scale", 1.0, 0.1, 1.0)
    image_format = args.get("format", "png")
    if image_format not in frames.FORMATS:
        raise StepFailed(f"format must be one of {', '.join(frames.FORMATS)}, got {image_format!r}")
    quality = int(number(args, "quality", 80, 1, 100))
    marks = flag(args, "marks", False)
    call.set_deadline(call.limits.screenshot_timeout)
    frame, shown, settled, agreed = _capture(call, flag(args, "settle", True))
    screen = shown.screen
    image = frames.scaled(frame.image, scale)
    if marks:
        width, height = image.size
        drawn = layout(
            screen.elements,
            width=width,
            height=height,
            scale=scale,
            char_width=frames.CHAR_WIDTH,
            line_height=frames.LINE_HEIGHT,
        )
        frames.draw_marks(image, drawn)
    data = frames.encode(image, image_format, quality)
    content_type, suffix = frames.FORMATS[image_format]
    path = call.write_artifact(data, call.step_id or "screenshot", suffix)
    call.memory.observed = screen
    width, height = image.size
    output = {
        **screen.to_json(),
        "image": {"width": width, "height": height, "format": image_format, "scale": scale, "marks": marks},
    }
    if not settled:
        output["settled"] = False
    if not agreed:
        output["agreed"] = False  # the screen kept changing across the capture
    return call.result("screenshot", output=as_json(output), artifact=path, content_type=content_type)


def _capture(call: Call, settle: bool) -> tuple[frames.Frame, Dump, bool, bool]:
    """Dump, capture, dump, until two dumps around a capture agree: (frame, last dump,
    settled, agreed).

    Two consecutive dumps that agree are also what settling asks for, so with `settle` the
    captures go on until they agree or SETTLE_TIMEOUT passes (then neither holds); without
    it, at most CAPTURE_TRIES captures are made.
    """
    watch = SettleWatch(quiet=0, timeout=SETTLE_TIMEOUT, started_at=time.monotonic(), interval=SETTLE_INTERVAL)
    before = dump(call)
    watch.sample(time.monotonic(), before.screen.fingerprint)
    tries = 0
    while True:
        tries += 1
        frame = frames.decode_raw(call.service(build.RAW_SCREENCAP, "screencap", max_bytes=frames.MAX_FRAME_BYTES))
        after = dump(call)
        verdict = watch.sample(time.monotonic(), after.screen.fingerprint)
        if after.screen.fingerprint == before.screen.fingerprint:
            return frame, after, True, True
        if (settle and isinstance(verdict, TimedOut)) or (not settle and tries == CAPTURE_TRIES):
            return frame, after, not settle, False
        before = after


def ui_tree(call: Call, args: dict[str, Any]) -> ActionResult:
    with_diff = flag(args, "diff", False)
    call.set_deadline(call.limits.command_timeout)
    seen = observe(call, flag(args, "settle", True))
    screen = seen.dump.screen
    output = {**screen.to_json(), **_settled(seen)}
    if with_diff:
        output["diff"] = tree_diff(call.memory.tree, screen).to_json()
    call.memory.observed = call.memory.tree = screen
    return call.result("ui_tree", output=as_json(output))


def ui_dump(call: Call, args: dict[str, Any]) -> ActionResult:
    """The raw XML of the (settled) screen as an artifact; not an observation for indices."""
    call.set_deadline(call.limits.command_timeout)
    seen = observe(call, flag(args, "settle", True))
    artifact = call.write_artifact(seen.dump.xml, call.step_id or "ui_dump", ".xml")
    output = "" if seen.settled else as_json(_settled(seen))
    return call.result("ui_dump", output=output, artifact=artifact, content_type=XML)


def _settled(seen: Observation) -> dict[str, Any]:
    """Only an observation that did not settle says so (specs/protocol.md, Outputs)."""
    return {} if seen.settled else {"settled": False}
