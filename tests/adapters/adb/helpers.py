"""Small helpers shared by the adb adapter tests."""

from __future__ import annotations

from tests.support.simulator import SERIAL  # noqa: F401  (re-exported for the tests here)
from tests.support.waiting import eventually  # noqa: F401  (re-exported for the tests here)


def ends(sim, serial: str) -> list[tuple[str, str]]:
    """(command, end) pairs of a device's shell log."""
    return [(r.command, r.end) for r in sim.log(serial) if r.service == "shell"]


def dump_xml(*nodes: dict, width: int = 1080, height: int = 2400, rotation: int = 0) -> str:
    """A `uiautomator dump` document: a root spanning the screen holding `nodes`, each a dict of
    attributes (`bounds` as a 4-tuple; `class` defaults to TextView)."""
    children = []
    for node in nodes:
        attributes = {"class": "android.widget.TextView", "package": "com.example.app", **node}
        left, top, right, bottom = attributes.pop("bounds")
        attributes["bounds"] = f"[{left},{top}][{right},{bottom}]"
        children.append("<node " + " ".join(f'{name}="{value}"' for name, value in attributes.items()) + " />")
    root = f'<node class="android.widget.FrameLayout" package="com.example.app" bounds="[0,0][{width},{height}]">'
    return f"<?xml version='1.0' encoding='UTF-8' standalone='yes' ?><hierarchy rotation=\"{rotation}\">{root}{''.join(children)}</node></hierarchy>"
