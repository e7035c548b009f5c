"""The observing actions: `screenshot`, `ui_tree` and `ui_dump`.

Each first waits for the screen to settle (`screen.observe`) unless `settle` is false.

`screenshot` reports the image and the element list of one moment: it dumps, captures the
raw frame, and dumps again; if the two dumps differ, the screen moved during the capture and
it captures again (at most `CAPTURE_TRIES` times; then `"agreed": false` says so). The
image is encoded on the host (`frames`), with marks drawn from the element list it reports,
so an index read off the image is the index in the output.

`screenshot` and `ui_tree` are the attempt's *observations*: the screen they report is
remembered, and a later `target.index` acts on it. `ui_tree` with `diff` also reports what
changed since the attempt's previous `ui_tree`.
"""

from __future__ import annotations

from typing import Any

from amc.core.ui.diff import diff as tree_diff
from amc.core.ui.marks import layout

from . import commands as build
from . import frames
from .calls import ActionResult, Call, as_json, flag, number
from .errors import StepFailed
from .screen import Observation, dump, observe

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
    seen = observe(call, flag(args, "settle", True))
    before, agreed = seen.dump, False
    for _ in range(CAPTURE_TRIES):
        frame = frames.decode_raw(call.service(build.RAW_SCREENCAP, "screencap", max_bytes=frames.MAX_FRAME_BYTES))
        after = dump(call)
        agreed = after.screen.fingerprint == before.screen.fingerprint
        before = after
        if agreed:
            break
    screen = before.screen
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
        **_settled(seen),
    }
    if not agreed:
        output["agreed"] = False  # the screen kept changing across the capture
    return call.result("screenshot", output=as_json(output), artifact=path, content_type=content_type)


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
    if seen.settled:
        return {"settled": True}
    return {"settled": False, "settle": seen.note}
