"""The simulated adb *server*: the smart-socket protocol ppadb speaks (specs/adb.md §1, §2, §4.1).

Per connection: read hex4 + service, answer OKAY (+ payload) or FAIL + hex4 + message in
one sendall, with the real server's FAIL texts. `host:transport:<serial>` keeps the
socket open for the device service that follows (`shell:`, `exec:`, `sync:`); everything
else answers once and closes.

Simulator-only host services (documented in the package docstring):

- `host:amc-sim-log:<serial>`: OKAY, then the JSON command log until EOF;
- `host:amc-sim-state:<serial>`: OKAY, then the JSON device snapshot until EOF;
- `host:amc-sim-fault:<serial>:<json>`: apply `{"state": ..., "silent": ..., "disconnect": ...,
  "broadcast_ime": ...}` (the run-time control interface, faults and all).

The JSON replies are not hex4-framed because a log can outgrow 65535 bytes.
"""

from __future__ import annotations

import json
import socket
import threading
from typing import Any

from .device import SimDevice
from .process import StreamClosed
from .sync import SyncSession
from .tcp import PEER_GONE, recv_exact, send_all, shutdown_quietly, wait_readable

HOST_FEATURES = (
    "push_sync,remount_shell,abb_exec,abb,apex,fixed_push_mkdir,ls_v2,stat_v2,fixed_push_symlink_timestamp,cmd,shell_v2"
)
DEVICE_FEATURES = "cmd"  # no shell_v2: clients then use legacy raw `shell:` (specs/adb.md §3.4)
SERVER_VERSION = 0x29  # adb 1.0.41

UNAUTHORIZED = (
    "device unauthorized.\nThis adb server's $ADB_VENDOR_KEYS is not set\n"
    "Try 'adb kill-server' if that seems wrong.\n"
    "Otherwise check for a confirmation dialog on your device."
)


def okay(payload: str | None = None) -> bytes:
    if payload is None:
        return b"OKAY"
    data = payload.encode()
    return b"OKAY" + b"%04x" % len(data) + data


def fail(message: str) -> bytes:
    data = message.encode()
    return b"FAIL" + b"%04x" % len(data) + data


class _SocketSink:
    """A process's output stream on a client socket (the socket stays owned by its handler)."""

    def __init__(self, sock: socket.socket):
        self._sock = sock
        self._lock = threading.Lock()

    def write(self, data: bytes) -> None:
        with self._lock:
            if not send_all(self._sock, data):
                raise StreamClosed()

    def close(self) -> None:
        shutdown_quietly(self._sock)  # FIN: the client's read_all() ends


class SmartSocketServer:
    """Answers one client connection at a time (the listener gives each its own thread)."""

    def __init__(self, devices: dict[str, SimDevice]):
        self._devices = devices

    # --- request framing ----------------------------------------------------------

    @staticmethod
    def _read_request(sock: socket.socket) -> str | None:
        header = recv_exact(sock, 4)
        if header is None:
            return None
        try:
            length = int(header, 16)
        except ValueError:
            return None
        body = recv_exact(sock, length)
        return None if body is None else body.decode("utf-8", "replace")

    def handle(self, sock: socket.socket) -> None:
        """Serve one client connection until its request is answered."""
        request = self._read_request(sock)
        if request is None:
            return
        if request.startswith("host:transport") or request.startswith("host:tport"):
            device, error = self._select_transport(request)
            if device is None:
                send_all(sock, fail(error))
                return
            send_all(sock, okay())
            service = self._read_request(sock)
            if service is not None:
                self._device_service(sock, device, service)
        elif request.startswith("host"):
            send_all(sock, self._host_service(request))
        else:
            # A device service without a transport goes to the only device, like transport-any.
            device, error = self._select_transport("host:transport-any")
            if device is None:
                send_all(sock, fail(error))
            else:
                self._device_service(sock, device, request)

    # --- host services --------------------------------------------------------------

    def _listed(self) -> list[SimDevice]:
        return [device for device in self._devices.values() if device.state != "absent"]

    def _select_transport(self, request: str) -> tuple[SimDevice | None, str]:
        if request in ("host:transport-any", "host:transport-local", "host:transport-usb"):
            listed = self._listed()
            if not listed:
                return None, "no devices/emulators found"
            if len(listed) > 1:
                return None, "more than one device/emulator"
            device = listed[0]
        else:
            serial = request.split(":", 2)[2] if request.count(":") >= 2 else ""
            found = self._devices.get(serial)
            if found is None or found.state == "absent":
                return None, f"device '{serial}' not found"
            device = found
        if device.state == "offline":
            return None, "device offline"
        if device.state == "unauthorized":
            return None, UNAUTHORIZED
        return device, ""

    def _host_service(self, request: str) -> bytes:
        if request == "host:version":
            return okay(f"{SERVER_VERSION:04x}")
        if request == "host:devices":
            return okay("".join(f"{d.serial}\t{d.state}\n" for d in self._listed()))
        if request == "host:devices-l":
            return okay(
                "".join(
                    f"{d.serial:<22} {d.state} product:{d.spec.product} "
                    f"model:{d.spec.model.replace(' ', '_')} device:{d.spec.product} "
                    f"transport_id:{index + 1}\n"
                    for index, d in enumerate(self._listed())
                )
            )
        if request == "host:host-features":
            return okay(HOST_FEATURES)
        if request == "host:kill":
            return okay()  # the simulator keeps running: its owner decides when it stops
        if request.startswith("host:amc-sim-"):
            return self._sim_service(request)
        if request.startswith("host-serial:"):
            device = next((d for d in self._devices.values() if request.startswith(f"host-serial:{d.serial}:")), None)
            if device is None:
                serial = request[len("host-serial:") :].rsplit(":", 1)[0]
                return fail(f"device '{serial}' not found")
            return self._device_query(device, request[len(f"host-serial:{device.serial}:") :])
        if request.startswith("host:") and request[5:] in ("features", "get-state", "get-serialno", "get-devpath"):
            device, error = self._select_transport("host:transport-any")
            return fail(error) if device is None else self._device_query(device, request[5:])
        return fail("unknown host service")

    def _device_query(self, device: SimDevice, query: str) -> bytes:
        _, error = self._select_transport(f"host:transport:{device.serial}")
        if query == "get-state":
            return okay(device.state) if device.state == "device" else fail(error)
        if query == "get-serialno":
            return okay(device.serial)
        if query == "get-devpath":
            return okay("unknown")
        if query == "features":
            return okay(DEVICE_FEATURES) if not error else fail(error)
        return fail("unknown host service")

    def _sim_service(self, request: str) -> bytes:
        name, _, rest = request[len("host:amc-sim-") :].partition(":")
        serial, argument = rest, ""
        if name == "fault":
            match = next((d for d in self._devices.values() if rest.startswith(d.serial + ":")), None)
            serial = match.serial if match else rest.split(":", 1)[0]
            argument = rest[len(serial) + 1 :]
        if serial and serial not in self._devices:
            return fail(f"device '{serial}' not found")
        targets = [self._devices[serial]] if serial else list(self._devices.values())
        body: dict[str, object]
        if name == "log":
            body = {d.serial: [r.to_json() for r in d.log.records()] for d in targets}
        elif name == "state":
            body = {d.serial: d.snapshot() for d in targets}
        elif name == "fault" and serial:
            try:
                apply_fault(targets[0], json.loads(argument or "{}"))
            except (ValueError, TypeError) as error:
                return fail(f"bad fault: {error}")
            return okay("ok")
        else:
            return fail("unknown host service")
        return b"OKAY" + json.dumps(body if not serial else body[serial]).encode()

    # --- device services ------------------------------------------------------------

    def _device_service(self, sock: socket.socket, device: SimDevice, service: str) -> None:
        if device.silent:
            # Like a device that never answers OPEN: the real server hangs too (specs/adb.md §3.6).
            while not wait_readable(sock, 0.2):
                pass
            return
        if service.startswith("shell:") and service != "shell:":
            self._shell(sock, device, service[len("shell:") :])
        elif service.startswith("exec:"):
            self._shell(sock, device, service[len("exec:") :])
        elif service == "sync:":
            self._sync(sock, device)
        else:
            send_all(sock, fail("closed"))  # what a device's refused OPEN looks like

    def _shell(self, sock: socket.socket, device: SimDevice, command: str) -> None:
        sink = _SocketSink(sock)
        if not send_all(sock, b"OKAY"):
            return
        process = device.start_shell(command, sink, via="server")

        def drop() -> None:
            shutdown_quietly(sock)
            process.hangup()

        link = device.add_link(drop)
        try:
            while not process.done.is_set():
                if wait_readable(sock, 0.05):
                    # ppadb never writes stdin on a raw shell, so readable means closed.
                    try:
                        data = sock.recv(4096)
                    except PEER_GONE:
                        data = b""
                    if not data:
                        process.hangup()
                        break
        finally:
            device.remove_link(link)

    def _sync(self, sock: socket.socket, device: SimDevice) -> None:
        if not send_all(sock, b"OKAY"):
            return
        session = SyncSession(device, via="server")
        link = device.add_link(lambda: shutdown_quietly(sock))
        try:
            while not session.finished:
                try:
                    data = sock.recv(65536)
                except PEER_GONE:
                    data = b""
                if not data:
                    break
                for reply in session.feed(data):
                    if not send_all(sock, reply):
                        return
        finally:
            session.close()
            device.remove_link(link)


def apply_fault(device: SimDevice, fault: dict[str, Any]) -> None:
    """Apply a control request: {"state": str, "silent": bool, "disconnect": bool, "broadcast_ime": bool}."""
    unknown = set(fault) - {"state", "silent", "disconnect", "broadcast_ime"}
    if unknown:
        raise ValueError(f"unknown fault keys {sorted(unknown)}")
    if "broadcast_ime" in fault:
        device.set_broadcast_ime(bool(fault["broadcast_ime"]))
    if "silent" in fault:
        device.set_silent(bool(fault["silent"]))
    if fault.get("disconnect"):
        device.disconnect(fault.get("state", "offline"))
    elif "state" in fault:
        device.set_state(fault["state"])
