"""Screen frames: `exec:screencap` (raw RGBA after a header) and `screencap -p` (PNG) show the
same picture, through the simulated server and through the real adb server, and the
picture draws every element's outline and text."""

from __future__ import annotations

import io
import struct
import subprocess

import pytest
from PIL import Image

from amc.adapters.adb._ppadb import Client
from amc.sim import SimDeviceSpec, Simulator
from amc.sim.screens import current_screen, screenshot_png
from tests.support.realadb import real_adb  # noqa: F401  (a fixture)

from .test_simulator_example_app import exec_out

MAIN = "com.example.app/.MainActivity"


def decode_raw(data: bytes) -> Image.Image:
    """A raw frame as the executor reads it: a 16-byte header, or 12 bytes on old Android."""
    width, height, pixel_format = struct.unpack_from("<III", data)
    assert pixel_format == 1  # RGBA_8888
    header = len(data) - width * height * 4
    assert header in (12, 16)
    return Image.frombytes("RGBA", (width, height), data[header:])


def same_picture(raw: bytes, png: bytes) -> None:
    frame, picture = decode_raw(raw), Image.open(io.BytesIO(png))
    assert picture.format == "PNG"
    assert frame.size == picture.size
    assert frame.getextrema()[3] == (255, 255)  # opaque
    assert frame.convert("RGB").tobytes() == picture.convert("RGB").tobytes()


@pytest.fixture
def sim():
    specs = [SimDeviceSpec(serial="amc-sim-01"), SimDeviceSpec(serial="old", sdk=27, width=720, height=1280)]
    with Simulator(specs) as simulator:
        yield simulator


def test_a_raw_frame_and_a_png_of_one_screen_are_the_same_picture(sim):
    device = Client("127.0.0.1", sim.server_port).device("amc-sim-01")
    device.shell(f"am start -n {MAIN}")
    device.shell("input text carol")
    raw = exec_out(sim.server_port, "amc-sim-01", "screencap")
    assert struct.unpack_from("<IIII", raw) == (1080, 2400, 1, 1)  # width, height, RGBA_8888, sRGB
    assert len(raw) == 16 + 1080 * 2400 * 4
    same_picture(raw, exec_out(sim.server_port, "amc-sim-01", "screencap -p"))
    assert device.screencap() == exec_out(sim.server_port, "amc-sim-01", "screencap -p")  # ppadb's shell: path


def test_old_android_writes_a_twelve_byte_header(sim):
    raw = exec_out(sim.server_port, "old", "screencap")
    assert struct.unpack_from("<III", raw) == (720, 1280, 1) and len(raw) == 12 + 720 * 1280 * 4
    same_picture(raw, exec_out(sim.server_port, "old", "screencap -p"))


def test_screencap_to_a_file_writes_png_for_png_names_and_raw_otherwise(sim):
    device = Client("127.0.0.1", sim.server_port).device("amc-sim-01")
    device.shell("screencap /sdcard/s.png; screencap /sdcard/s.raw")
    files = sim.device("amc-sim-01").files
    same_picture(files["/sdcard/s.raw"], files["/sdcard/s.png"])


def test_the_real_adb_server_carries_both_frames_byte_for_byte(real_adb, sim):  # noqa: F811
    serial = real_adb.connect(sim.device_ports["amc-sim-01"])
    real_adb.run("-s", serial, "shell", f"am start -n {MAIN}")

    def exec_out_via_adb(*command: str) -> bytes:
        result = subprocess.run(
            [real_adb.executable, "-P", str(real_adb.port), "-s", serial, "exec-out", *command],
            env=real_adb.env,
            capture_output=True,
            timeout=20,
        )
        assert result.returncode == 0, result.stderr
        return result.stdout

    raw, png = exec_out_via_adb("screencap"), exec_out_via_adb("screencap", "-p")
    assert raw == exec_out(sim.server_port, "amc-sim-01", "screencap")
    same_picture(raw, png)
    # The adb CLI quotes each argument it passes on.
    assert [r.command for r in sim.log("amc-sim-01") if r.via == "adbd"][-2:] == ["screencap", "screencap '-p'"]


def test_every_element_is_drawn_with_its_outline_and_its_text():
    spec = SimDeviceSpec(serial="s")
    screen = current_screen(spec, MAIN, "dave")
    picture = Image.open(io.BytesIO(screenshot_png(spec, screen))).convert("RGB")
    background = picture.getpixel((screen.width // 2, screen.height - 2))
    for node in screen.root.walk():
        x1, y1, x2, y2 = node.bounds
        if node is screen.root:
            continue
        # The outline: the left edge differs from the page's background.
        assert picture.getpixel((x1, (y1 + y2) // 2)) != background, node
        if node.text:
            # The text: dark (or, on dark fills, light) strokes in the left part of the box.
            box = picture.crop((x1, y1, x1 + (x2 - x1) // 2, y2))
            assert len(box.getcolors(maxcolors=1 << 16) or ()) > 8, node  # glyphs anti-aliased over the fill
    # Another text in the field draws another picture of that field, and only there.
    other = Image.open(io.BytesIO(screenshot_png(spec, current_screen(spec, MAIN, "erin")))).convert("RGB")
    field = next(node for node in screen.root.walk() if node.cls == "android.widget.EditText").bounds
    assert picture.crop(field).tobytes() != other.crop(field).tobytes()
    picture.paste(other.crop(field), field[:2])
    assert picture.tobytes() == other.tobytes()
