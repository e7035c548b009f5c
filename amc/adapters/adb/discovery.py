"""Which devices a host has, and the attributes it advertises for task matching.

Only devices in state `device` count: ppadb's `devices()` without a state also returns
offline and unauthorized ones, on which every call fails (specs/adb.md §5).

Attributes (all strings, for `requirements.attributes`): `model` (ro.product.model),
`manufacturer` (ro.product.manufacturer), `sdk` (ro.build.version.sdk) and `screen_size`
("1080x2400", from `wm size`; an `Override size` wins, as taps use that geometry).
"""

from __future__ import annotations

import re

import attrs

from ._ppadb import Device
from .client import BoundedClient, call, run_stream
from .errors import DeviceUnavailable, StepFailed, StepTimedOut
from .guard import Stopper

_PROPERTY = re.compile(r"^\[(?P<key>[^\]]*)\]: \[(?P<value>.*)\]\r?$")
_SIZE = re.compile(r"^(?P<kind>Physical|Override) size: (?P<size>\d+x\d+)\r?$")

ATTRIBUTE_PROPERTIES = {
    "model": "ro.product.model",
    "manufacturer": "ro.product.manufacturer",
    "sdk": "ro.build.version.sdk",
}


@attrs.frozen
class DeviceInfo:
    """One usable device and its attributes."""

    serial: str
    attributes: dict[str, str]


def list_serials(client: BoundedClient, *, timeout: float = 10.0) -> list[str]:
    """Serials of the devices in state `device`, in the server's order."""
    stopper = Stopper()
    with stopper.active():
        stopper.set_deadline(timeout)
        devices = call(stopper, lambda: client.devices(state="device"))
    if stopper.tripped or devices is None:  # None: only when the stopper tripped
        raise StepTimedOut(f"adb did not list devices within {timeout} s")
    return [device.serial for device in devices]


def _shell_text(device: Device, command: str, timeout: float) -> str:
    stopper = Stopper()
    with stopper.active():
        stopper.set_deadline(timeout)
        output = run_stream(device, command, stopper)
    if stopper.tripped:
        raise StepTimedOut(f"{command!r} did not finish within {timeout} s")
    if not output.opened:
        raise DeviceUnavailable(f"{device.serial}: {command!r} was not accepted")
    try:
        return output.data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise StepFailed(f"{command!r} printed non-UTF-8 output") from error


def parse_properties(text: str) -> dict[str, str]:
    """`getprop` output (`[key]: [value]` lines) as a dict."""
    found = {}
    for line in text.splitlines():
        match = _PROPERTY.match(line)
        if match:
            found[match.group("key")] = match.group("value")
    return found


def parse_screen_size(text: str) -> str | None:
    """`wm size` output to "WxH"; the override size wins over the physical one."""
    sizes = {}
    for line in text.splitlines():
        match = _SIZE.match(line.strip())
        if match:
            sizes[match.group("kind")] = match.group("size")
    return sizes.get("Override") or sizes.get("Physical")


def read_attributes(client: BoundedClient, serial: str, *, timeout: float = 10.0) -> dict[str, str]:
    """Model, manufacturer, sdk and screen size of one device (two shell calls)."""
    device = Device(client, serial)
    properties = parse_properties(_shell_text(device, "getprop", timeout))
    attributes = {name: properties[key] for name, key in ATTRIBUTE_PROPERTIES.items() if key in properties}
    size = parse_screen_size(_shell_text(device, "wm size", timeout))
    if size:
        attributes["screen_size"] = size
    return attributes


def discover(client: BoundedClient, *, timeout: float = 10.0) -> list[DeviceInfo]:
    """Every usable device with its attributes; a device that fails to answer is left out."""
    found = []
    for serial in list_serials(client, timeout=timeout):
        try:
            found.append(DeviceInfo(serial, read_attributes(client, serial, timeout=timeout)))
        except StepFailed:
            continue  # it went away or hangs: it is not usable now, the next scan retries
    return found
