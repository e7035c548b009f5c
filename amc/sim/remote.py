"""Reading (and poking) a simulator that runs in another process, over its server port."""

from __future__ import annotations

import json
import socket
from typing import TYPE_CHECKING, Any

from .log import CommandRecord

if TYPE_CHECKING:
    from .device import DeviceState


class SimulatorError(Exception):
    """The simulator refused a request (FAIL) or closed early."""


def _request(service: str, port: int, host: str, timeout: float) -> bytes:
    with socket.create_connection((host, port), timeout=timeout) as sock:
        data = service.encode()
        sock.sendall(b"%04X" % len(data) + data)
        reply = bytearray()
        while chunk := sock.recv(65536):
            reply += chunk
    if reply[:4] == b"FAIL":
        raise SimulatorError(reply[8:].decode("utf-8", "replace"))
    if reply[:4] != b"OKAY":
        raise SimulatorError(f"unexpected reply {bytes(reply[:16])!r}")
    return bytes(reply[4:])


def fetch_log(port: int, serial: str, *, host: str = "127.0.0.1", timeout: float = 5.0) -> list[CommandRecord]:
    """The command log of `serial` from the simulator serving smart sockets on host:port."""
    body = json.loads(_request(f"host:amc-sim-log:{serial}", port, host, timeout))
    return [CommandRecord.from_json(entry) for entry in body]


def fetch_state(port: int, serial: str, *, host: str = "127.0.0.1", timeout: float = 5.0) -> DeviceState:
    """The observable state of `serial` (foreground app, typed text, files, processes)."""
    state: DeviceState = json.loads(_request(f"host:amc-sim-state:{serial}", port, host, timeout))
    return state


def inject_fault(port: int, serial: str, *, host: str = "127.0.0.1", timeout: float = 5.0, **fault: Any) -> None:
    """Apply a fault remotely: state="offline"|..., silent=bool, disconnect=bool, broadcast_ime=bool."""
    reply = _request(f"host:amc-sim-fault:{serial}:{json.dumps(fault)}", port, host, timeout)
    if reply[4:] != b"ok":
        raise SimulatorError(f"unexpected reply {reply!r}")
