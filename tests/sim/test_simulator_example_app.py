"""The example app and the device commands of on-screen actions, driven over the adb protocol
(ppadb against the simulated server; raw smart sockets for binary output) with a clock the
test moves: typing, delayed elements, scrolling, double taps, long presses, keys, the
broadcast IME, rotation, app commands, and what a dump carries."""

from __future__ import annotations

import base64
import re
import socket
import xml.etree.ElementTree as ElementTree

import pytest

from amc.adapters.adb._ppadb import Client
from amc.sim import SimDeviceSpec, Simulator, inject_fault

SERIAL = "amc-sim-01"
MAIN = "com.example.app/.MainActivity"
DUMPED = "UI hierchary dumped to: /dev/tty\n"
ATTRIBUTES = [
    "index",
    "text",
    "resource-id",
    "class",
    "package",
    "content-desc",
    "checkable",
    "checked",
    "clickable",
    "enabled",
    "focusable",
    "focused",
    "scrollable",
    "long-clickable",
    "password",
    "selected",
    "bounds",
]


class Clock:
    """The devices' screen clock, moved by the test."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


@pytest.fixture
def clock():
    return Clock()


@pytest.fixture
def phones(clock):
    specs = [SimDeviceSpec(serial=SERIAL), SimDeviceSpec(serial="amc-sim-ime", broadcast_ime=True)]
    with Simulator(specs, clock=clock, adbd=False) as simulator:
        yield simulator


@pytest.fixture
def phone(phones):
    return Client("127.0.0.1", phones.server_port).device(SERIAL)


def exec_out(port: int, serial: str, command: str) -> bytes:
    """What an `exec:` stream returns, byte for byte (as `adb exec-out` reads it)."""
    with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
        for request in (f"host:transport:{serial}", f"exec:{command}"):
            sock.sendall(b"%04x" % len(request) + request.encode())
            assert sock.recv(4) == b"OKAY"
        data = bytearray()
        while chunk := sock.recv(1 << 20):
            data += chunk
        return bytes(data)


def dump(device) -> ElementTree.Element:
    output = device.shell("uiautomator dump /dev/tty")
    assert output.endswith(DUMPED)
    return ElementTree.fromstring(output[: -len(DUMPED)])


def texts(root: ElementTree.Element) -> list[str]:
    return [node.get("text") for node in root.iter("node") if node.get("text")]


def node(root: ElementTree.Element, **wanted: str) -> ElementTree.Element:
    return next(n for n in root.iter("node") if all(n.get(k.replace("_", "-")) == v for k, v in wanted.items()))


def bounds(element: ElementTree.Element) -> tuple[int, int, int, int]:
    x1, y1, x2, y2 = map(int, re.findall(r"\d+", element.get("bounds")))
    return x1, y1, x2, y2


def centre(root: ElementTree.Element, text: str) -> str:
    x1, y1, x2, y2 = bounds(node(root, text=text))
    return f"{(x1 + x2) // 2} {(y1 + y2) // 2}"


def test_the_username_shows_what_is_typed_and_the_greeting_appears_after_a_second(phone, clock):
    phone.shell(f"am start -n {MAIN}")
    screen = dump(phone)
    field = node(screen, resource_id="com.example.app:id/username")
    assert (field.get("class"), field.get("text"), field.get("focused")) == (
        "android.widget.EditText",
        "Username",
        "true",
    )
    assert texts(screen) == ["Example", "Username", "Log in", "Details", "Catalogue", "Slow page", "Gestures"]
    phone.shell(f"input tap {centre(screen, 'Username')}; input text alice")
    assert node(dump(phone), resource_id="com.example.app:id/username").get("text") == "alice"
    phone.shell(f"input tap {centre(screen, 'Log in')}")
    assert texts(dump(phone)) == ["Welcome", "Signing in…"]
    clock.advance(0.99)
    assert texts(dump(phone)) == ["Welcome", "Signing in…"]
    clock.advance(0.01)
    greeting = node(dump(phone), resource_id="com.example.app:id/greeting")
    assert greeting.get("text") == "Signed in as alice"
    phone.shell("input keyevent KEYCODE_BACK")
    assert node(dump(phone), resource_id="com.example.app:id/username").get("text") == "alice"


def test_the_slow_page_is_ready_after_one_and_a_half_seconds(phone, clock):
    phone.shell(f"am start -n {MAIN}")
    phone.shell(f"input tap {centre(dump(phone), 'Slow page')}")
    assert node(dump(phone), resource_id="com.example.app:id/status").get("text") == "Loading…"
    clock.advance(1.5)
    assert node(dump(phone), resource_id="com.example.app:id/status").get("text") == "Ready"


def visible_items(root: ElementTree.Element) -> list[str]:
    listing = node(root, resource_id="com.example.app:id/list")
    return [n.get("text") for n in listing.iter("node") if n.get("text")]


def test_the_catalogue_scrolls_by_whole_rows_within_its_ends(phone):
    phone.shell("am start -n com.example.app/.ListActivity")
    screen = dump(phone)
    listing = node(screen, resource_id="com.example.app:id/list")
    assert (listing.get("class"), listing.get("scrollable")) == ("android.widget.ListView", "true")
    assert bounds(listing) == (0, 200, 1080, 2400)
    assert visible_items(screen) == [f"Item {n}" for n in range(1, 12)]
    phone.shell("input swipe 540 1800 540 1000 300")  # the finger moves up 4 rows: later rows come in
    assert visible_items(dump(phone))[:2] == ["Item 5", "Item 6"]
    phone.shell("input swipe 540 400 540 2200")  # down 9 rows: back to the top, and no further
    assert visible_items(dump(phone))[0] == "Item 1"
    for _ in range(4):
        phone.shell("input swipe 540 2200 540 400 100")
    assert visible_items(dump(phone))[-1] == "Item 40"
    assert len(visible_items(dump(phone))) == 11
    phone.shell("input swipe 540 100 540 2000 100")  # starts on the title bar: not the list's
    assert visible_items(dump(phone))[-1] == "Item 40"


def test_a_double_tap_is_two_taps_at_one_point_within_half_a_second(phone, clock):
    phone.shell("am start -n com.example.app/.GestureActivity")
    point = centre(dump(phone), "Double-tap me")
    phone.shell(f"input tap {point}")
    clock.advance(0.6)
    phone.shell(f"input tap {point}")
    assert "Double-tap me" in texts(dump(phone))  # too slow: two taps
    phone.shell(f"input tap {point}; input tap {point}")
    assert "Double-tapped" in texts(dump(phone))
    assert phone.shell("input keyevent BACK") == ""


def test_a_long_press_opens_the_menu_and_a_tap_or_back_closes_it(phone):
    phone.shell("am start -n com.example.app/.GestureActivity")
    screen = dump(phone)
    row = next(n for n in screen.iter("node") if n.get("long-clickable") == "true")
    assert [n.get("text") for n in row.iter("node") if n.get("text")] == ["Press and hold"]
    point = centre(screen, "Press and hold")
    phone.shell(f"input swipe {point} {point} 100")  # a short press is a tap
    assert "Copy" not in texts(dump(phone))
    phone.shell(f"input swipe {point} {point} 600")
    menu = dump(phone)
    assert texts(menu)[-2:] == ["Copy", "Delete"]
    assert node(menu, text="Copy").get("clickable") == "true"
    phone.shell(f"input tap {centre(menu, 'Copy')}")
    assert "Copy" not in texts(dump(phone))
    phone.shell(f"input swipe {point} {point} 1000")
    phone.shell("input keyevent 4")
    after = dump(phone)
    assert "Copy" not in texts(after) and texts(after)[0] == "Gestures"  # BACK closed the menu only


def test_keys_edit_the_focused_field_and_switch_apps(phones, phone):
    phone.shell(f"am start -n {MAIN}")
    phone.shell("input text hello")
    phone.shell("input keyevent KEYCODE_MOVE_END KEYCODE_DEL 67 KEYCODE_ENTER")
    assert node(dump(phone), resource_id="com.example.app:id/username").get("text") == "hel"
    phone.shell("am start -n com.example.app/.ListActivity")
    phone.shell("input swipe 540 1800 540 1000 300")
    phone.shell("input keyevent KEYCODE_APP_SWITCH")
    recents = dump(phone)
    assert texts(recents) == ["Recents", "Example"]
    phone.shell(f"input tap {centre(recents, 'Example')}")
    assert visible_items(dump(phone))[0] == "Item 5"  # the activity comes back as it was left
    assert phones.device(SERIAL).back_stack == [MAIN]
    phone.shell("input keyevent KEYCODE_HOME")
    assert texts(dump(phone))[0] == "Home"
    assert "unknown keycode" in phone.shell("input keyevent KEYCODE_NOPE")


def test_the_broadcast_ime_is_off_by_default(phones, phone):
    assert phone.shell("settings get secure default_input_method").strip() != "com.android.adbkeyboard/.AdbIME"
    phone.shell(f"am start -n {MAIN}")
    message = base64.b64encode("héllo ✓".encode()).decode()
    reply = phone.shell(f"am broadcast -a ADB_INPUT_B64 --es msg {message}")
    assert reply.endswith("Broadcast completed: result=0\n")
    assert node(dump(phone), resource_id="com.example.app:id/username").get("text") == "Username"
    assert "non-ASCII" in phone.shell("input text héllo")
    assert "com.android.adbkeyboard" not in phone.shell("pm list packages")


@pytest.mark.parametrize("how", ["spec", "control"])
def test_the_broadcast_ime_types_and_clears_unicode_when_on(phones, how):
    serial = "amc-sim-ime" if how == "spec" else SERIAL
    if how == "control":
        inject_fault(phones.server_port, serial, broadcast_ime=True)
    device = Client("127.0.0.1", phones.server_port).device(serial)
    assert device.shell("settings get secure default_input_method") == "com.android.adbkeyboard/.AdbIME\n"
    assert "package:com.android.adbkeyboard\n" in device.shell("pm list packages -3")
    device.shell(f"am start -n {MAIN}")
    message = base64.b64encode("Zoë 😀".encode()).decode()
    device.shell(f"am broadcast -a ADB_INPUT_B64 --es msg {message}")
    assert node(dump(device), resource_id="com.example.app:id/username").get("text") == "Zoë 😀"
    assert phones.device(serial).typed_text == "Zoë 😀"
    device.shell("am broadcast -a ADB_CLEAR_TEXT")
    assert node(dump(device), resource_id="com.example.app:id/username").get("text") == "Username"
    if how == "control":
        inject_fault(phones.server_port, serial, broadcast_ime=False)
        assert "adbkeyboard" not in device.shell("settings get secure default_input_method")


def test_landscape_swaps_the_sides_of_dumps_and_frames(phones, phone):
    phone.shell("settings put system user_rotation 1")  # auto-rotate still on: stays portrait
    assert dump(phone).get("rotation") == "0"
    phone.shell("settings put system accelerometer_rotation 0 && settings put system user_rotation 1")
    assert phone.shell("settings get system user_rotation") == "1\n"
    landscape = dump(phone)
    assert landscape.get("rotation") == "1"
    assert bounds(landscape[0]) == (0, 0, 2400, 1080)
    assert exec_out(phones.server_port, SERIAL, "screencap")[:8] == (2400).to_bytes(4, "little") + (1080).to_bytes(
        4, "little"
    )
    assert phone.shell("wm size") == "Physical size: 1080x2400\n"  # the panel does not turn
    phone.shell("settings put system user_rotation 0")
    assert bounds(dump(phone)[0]) == (0, 0, 1080, 2400)
    assert "user_rotation=0\n" in phone.shell("settings list system")
    assert phone.shell("settings get global nothing_here") == "null\n"
    assert phone.shell("settings delete system user_rotation") == "Deleted 1 rows\n"
    assert "usage: settings" in phone.shell("settings get nowhere x")


def test_app_commands_stop_clear_open_urls_and_list_packages(phones, phone):
    phone.shell(f"am start -n {MAIN}")
    phone.shell("input text bob")
    phone.shell("am force-stop com.example.app")
    assert texts(dump(phone))[0] == "Home"
    phone.shell(f"am start -n {MAIN}")
    assert node(dump(phone), resource_id="com.example.app:id/username").get("text") == "bob"  # app data survives
    assert phone.shell("pm clear com.example.app") == "Success\n"
    assert texts(dump(phone))[0] == "Home"  # clearing stops the app too
    phone.shell(f"am start -n {MAIN}")
    assert node(dump(phone), resource_id="com.example.app:id/username").get("text") == "Username"
    assert phone.shell("pm clear com.nope") == "Failed\n"

    url = "https://example.org/a?b=c"
    assert "Error" not in phone.shell(f"am start -a android.intent.action.VIEW -d '{url}'")
    assert phones.device(SERIAL).foreground == "com.android.chrome/com.google.android.apps.chrome.Main"
    assert node(dump(phone), resource_id="com.android.chrome:id/url_bar").get("text") == url
    assert "unable to resolve Intent" in phone.shell("am start -a android.intent.action.VIEW -d mailto:x@y.z")

    everything = phone.shell("pm list packages").splitlines()
    assert {"package:com.android.settings", "package:com.android.chrome", "package:com.example.app"} <= set(everything)
    assert phone.shell("pm list packages -3") == "package:com.example.app\n"


def test_a_dump_carries_every_attribute_of_a_real_one_in_its_order(phone):
    phone.shell("am start -n com.example.app/.ListActivity")
    for element in dump(phone).iter("node"):
        assert list(element.attrib) == ATTRIBUTES
        assert all(element.get(flag) in ("true", "false") for flag in ATTRIBUTES[6:16])
