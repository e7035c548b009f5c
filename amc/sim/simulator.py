"""`Simulator`: simulated devices behind a smart-socket server and per-device adbd ports."""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable, Sequence

from .adbd import AdbdServer
from .device import SimDevice
from .log import CommandRecord
from .smart_socket import SmartSocketServer
from .spec import SimDeviceSpec, default_specs
from .tcp import TcpListener

# A starting adb server probes these ports and would adopt a device found there (specs/adb.md §3.9).
EMULATOR_PORTS = range(5555, 5586)


class Simulator:
    """Simulated Android devices, served in background threads.

    Args:
        devices: how many default devices to create, or their specs.
        host: the address every listener binds.
        server_port: the smart-socket (adb server) port; 0 picks a free one.
        device_base_port: device i's adbd listens on base + i; None picks free ports.
            Ports 5555-5585 are refused because a real adb server adopts them on its own.
        adbd: whether to open the per-device adbd ports at all.
        clock: the devices' screen clock (monotonic seconds): what delayed elements wait on,
            and what tells a double tap from two taps. Tests pass one they can move.

    Use it as a context manager (or call start()/stop()). Once started, `server_port` is
    the port for `ppadb.client.Client(host, port)`, and `device_ports[serial]` the port
    for `adb connect host:port`.
    """

    def __init__(
        self,
        devices: int | Sequence[SimDeviceSpec] = 1,
        *,
        host: str = "127.0.0.1",
        server_port: int = 0,
        device_base_port: int | None = None,
        adbd: bool = True,
        clock: Callable[[], float] = time.monotonic,
    ):
        specs = default_specs(devices) if isinstance(devices, int) else list(devices)
        serials = [spec.serial for spec in specs]
        if len(set(serials)) != len(serials):
            raise ValueError("device serials must be unique")
        if device_base_port is not None and adbd:
            wanted = range(device_base_port, device_base_port + len(specs))
            if any(port in EMULATOR_PORTS for port in wanted):
                raise ValueError("adbd ports 5555-5585 would be adopted by any adb server; pick others")
        self.host = host
        pids = itertools.count(4000).__next__  # one pid space, so pids never repeat
        self.devices: dict[str, SimDevice] = {spec.serial: SimDevice(spec, pids, clock) for spec in specs}
        self._server_port = server_port
        self._device_base_port = device_base_port
        self._adbd = adbd
        self._server: TcpListener | None = None
        self._device_listeners: dict[str, TcpListener] = {}

    # --- lifecycle ----------------------------------------------------------------

    def start(self) -> Simulator:
        try:
            self._server = TcpListener(
                self.host, self._server_port, SmartSocketServer(self.devices).handle, name="sim-server"
            )
            self._server.start()
            if self._adbd:
                for index, (serial, device) in enumerate(self.devices.items()):
                    port = 0 if self._device_base_port is None else self._device_base_port + index
                    listener = TcpListener(self.host, port, AdbdServer(device).handle, name=f"sim-adbd-{serial}")
                    self._device_listeners[serial] = listener
                    listener.start()
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        """Close every listener and connection and kill every process; idempotent."""
        listeners = list(self._device_listeners.values())
        if self._server is not None:
            listeners.append(self._server)
        for listener in listeners:
            listener.close()
        for device in self.devices.values():
            device.kill_all("SIGKILL")

    def __enter__(self) -> Simulator:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    # --- addresses ----------------------------------------------------------------

    @property
    def server_port(self) -> int:
        if self._server is None:
            raise RuntimeError("the simulator is not started")
        return self._server.port

    @property
    def device_ports(self) -> dict[str, int]:
        return {serial: listener.port for serial, listener in self._device_listeners.items()}

    # --- observation and faults ---------------------------------------------------

    def device(self, serial: str) -> SimDevice:
        return self.devices[serial]

    def log(self, serial: str) -> list[CommandRecord]:
        """Every command `serial` received so far, in order."""
        return self.devices[serial].log.records()

    def commands(self, serial: str, service: str = "shell") -> list[str]:
        """Just the command strings of `log(serial)` for one service."""
        return [record.command for record in self.log(serial) if record.service == service]

    def set_state(self, serial: str, state: str) -> None:
        """device, offline, unauthorized or absent (gone from host:devices)."""
        self.devices[serial].set_state(state)

    def set_silent(self, serial: str, silent: bool = True) -> None:
        """A silent device accepts the transport and then never answers a service."""
        self.devices[serial].set_silent(silent)

    def set_broadcast_ime(self, serial: str, on: bool = True) -> None:
        """Make the ADB keyboard (a broadcast IME) the device's input method, or take it away."""
        self.devices[serial].set_broadcast_ime(on)

    def disconnect(self, serial: str, state: str = "offline") -> None:
        """Cut the device's live streams now, leaving it in `state` (e.g. absent)."""
        self.devices[serial].disconnect(state)
