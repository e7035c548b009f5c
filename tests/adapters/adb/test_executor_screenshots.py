"""`screenshot` through ppadb against the simulator: a raw frame encoded on the host, its
element list in the output, marks on those elements, formats and scale, and the failures."""

from __future__ import annotations

import io
import itertools
import json
import struct

import pytest
from PIL import Image

from amc.adapters.adb import frames
from amc.adapters.adb.errors import StepFailed
from amc.sim import programs
from amc.sim.screens import screenshot_png

from .helpers import SERIAL, dump_xml

req = pytest.mark.req


def image_of(result) -> Image.Image:
    return Image.open(io.BytesIO(result.artifact.read_bytes()))


def example_app(executor):
    executor.run("launch", {"package": "com.example.app"})


@req("UI/s11")
def test_a_screenshot_is_a_raw_frame_encoded_on_the_host_with_its_element_list(executor, sim, tmp_path):
    example_app(executor)
    since = len(sim.commands(SERIAL))
    result = executor.run("screenshot", {}, step_id="shot/1")
    assert (result.content_type, result.artifact.suffix) == ("image/png", ".png")
    assert result.artifact.parent == tmp_path / "artifacts"
    assert result.artifact.name.startswith("amc-sim-01-shot_1-")
    output = json.loads(result.output)
    assert output["image"] == {"width": 1080, "height": 2400, "format": "png", "scale": 1.0, "marks": False}
    assert output["screen"] == {"width": 1080, "height": 2400, "rotation": 0}
    assert "settled" not in output, "only an observation that did not settle says so"
    assert "Log in" in [element["text"] for element in output["elements"]]
    # A dump, the raw frame over exec: (no pty), and a dump that agrees: settled and agreed.
    commands = sim.commands(SERIAL)[since:]
    assert commands[1] == "screencap" and len(commands) == 3
    assert all("uiautomator dump" in commands[i] for i in (0, 2))
    # The same pixels as the device's own PNG.
    device = sim.device(SERIAL)
    png = Image.open(io.BytesIO(screenshot_png(device.spec, device.screen())))
    assert image_of(result).convert("RGB").tobytes() == png.convert("RGB").tobytes()
    again = executor.run("screenshot", {}, step_id="shot/1")
    assert again.artifact != result.artifact, "an artifact is never overwritten"


@req("UI/s11")
@pytest.mark.parametrize(
    ("args", "pillow", "content_type", "size"),
    [
        ({"format": "jpeg", "quality": 60}, "JPEG", "image/jpeg", (1080, 2400)),
        ({"format": "webp", "scale": 0.5}, "WEBP", "image/webp", (540, 1200)),
        ({"scale": 0.25, "settle": False}, "PNG", "image/png", (270, 600)),
    ],
)
def test_format_and_scale(executor, args, pillow, content_type, size):
    example_app(executor)
    result = executor.run("screenshot", args)
    image = image_of(result)
    assert (image.format, image.size, result.content_type) == (pillow, size, content_type)
    assert json.loads(result.output)["image"]["width"] == size[0]


@req("UI/s11")
@pytest.mark.parametrize("scale", [1.0, 0.5])
def test_marks_agree_with_the_element_list(executor, scale):
    example_app(executor)
    plain = image_of(executor.run("screenshot", {"scale": scale})).convert("RGB")
    result = executor.run("screenshot", {"scale": scale, "marks": True})
    marked = image_of(result).convert("RGB")
    output = json.loads(result.output)
    assert output["image"]["marks"] is True
    elements = output["elements"]
    assert elements
    for element in elements:
        left, top, right, bottom = element["bounds"]
        x1, y1 = int(left * scale), int(top * scale)
        x2 = min(marked.width, -int(-right * scale)) - 1
        middle = (int(top * scale) + min(marked.height, -int(-bottom * scale))) // 2
        for x in (x1, x2):  # the box's left and right edges run along the element's bounds
            assert marked.getpixel((x, middle)) == frames.MARK_COLOUR, (element, x, middle)
        assert x1 <= marked.width and y1 <= marked.height
    # Away from every element the marked image is the plain one.
    corner = (marked.width - 1, marked.height - 1)
    if not any(e["bounds"][2] * scale >= corner[0] and e["bounds"][3] * scale >= corner[1] for e in elements):
        assert marked.getpixel(corner) == plain.getpixel(corner)


@req("UI/s4", "UI/s11")
def test_a_screenshot_is_the_observation_an_index_acts_on(executor):
    example_app(executor)
    elements = json.loads(executor.run("screenshot", {"scale": 0.5, "marks": True}).output)["elements"]
    details = next(element for element in elements if element["text"] == "Details")
    done = json.loads(executor.run("tap", {"target": {"index": details["index"]}}).output)
    assert done["element"] == details


def test_a_truncated_frame_from_the_device_fails_the_step(executor, monkeypatch):
    def short(inv):
        inv.out(struct.pack("<IIII", 1080, 2400, 1, 0) + b"\xff" * 1000)
        return 0

    monkeypatch.setitem(programs.REGISTRY, "screencap", short)
    with pytest.raises(StepFailed, match=r"screencap sent 1016 bytes for a 1080x2400 frame .* cut short"):
        executor.run("screenshot", {"settle": False})


def moving_screen(monkeypatch):
    counter = itertools.count()

    def uiautomator(inv):
        path = inv.args[1]
        inv.device.files[path] = dump_xml({"text": f"frame {next(counter)}", "bounds": (0, 0, 100, 100)}).encode()
        inv.out(f"UI hierchary dumped to: {path}\n")
        return 0

    monkeypatch.setitem(programs.REGISTRY, "uiautomator", uiautomator)


def test_a_screen_that_moves_during_the_capture_is_captured_again_and_said(executor, sim, monkeypatch):
    moving_screen(monkeypatch)
    output = json.loads(executor.run("screenshot", {"settle": False}).output)
    assert output["agreed"] is False and "settled" not in output
    assert sim.commands(SERIAL).count("screencap") == 3
    assert output["elements"][0]["text"] == "frame 3", "the elements are the last dump's"


@req("UI/s9")
def test_a_screenshot_that_never_settles_goes_on_after_the_bound_and_says_so(executor, sim, monkeypatch):
    moving_screen(monkeypatch)
    output = json.loads(executor.run("screenshot", {}).output)
    assert (output["settled"], output["agreed"]) == (False, False)
    captures = sim.commands(SERIAL).count("screencap")
    assert captures > 3, "with settle it kept trying for the settle bound, not for a number of captures"
    assert output["elements"][0]["text"] == f"frame {captures}"


def test_bad_screenshot_arguments_fail_before_anything_is_sent(executor, sim):
    for args, message in [
        ({"scale": 0}, "scale must be a number in 0.1..1"),
        ({"format": "gif"}, "format must be one of png, jpeg, webp"),
        ({"quality": 0}, "quality must be a number in 1..100"),
        ({"marks": "yes"}, "marks must be true or false"),
    ]:
        with pytest.raises(StepFailed, match=message):
            executor.run("screenshot", args)
    assert sim.log(SERIAL) == []


def test_a_frame_past_the_bound_is_refused_not_held(executor, monkeypatch):
    monkeypatch.setattr(frames, "MAX_FRAME_BYTES", 100_000)
    with pytest.raises(StepFailed, match="screencap sent more than 100000 bytes"):
        executor.run("screenshot", {"settle": False})
