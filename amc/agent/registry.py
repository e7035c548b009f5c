"""Which devices this host has, and keeping the server's inventory of them current.

A scan lists the devices adb shows in state `device` and reads the attributes of new
ones (two shell calls each: getprop, wm size); attributes of a device already seen are
remembered until it goes away, so a steady scan costs one `host:devices` request.

The inventory is PUT when it differs from what the server last accepted, or when the
last PUT got no answer. When adb itself cannot be asked (its server down), the last
inventory stands: dropping every device on one hiccup would make the server release them
and requeue nothing while the agent cannot tell what is attached. Standing is all it does,
though: `refresh` then answers None (nothing seen), so the host keeps its slots as they
are and gives no new slot to a device that went away under a step. Such a device is not
known to be back until a scan lists it again; claiming for it before that would only take
its released task back onto a device that cannot run it, and spend the task's attempts. A registration that
is refused with 401 or 403 before any succeeded means this agent is misconfigured
(token, host id); that is fatal, since no later retry can succeed. Later, it is logged
and retried: attempts under way may still finish.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Protocol, TypeVar

from amc.adapters.adb.client import BoundedClient
from amc.adapters.adb.discovery import DeviceInfo, list_serials, read_attributes
from amc.adapters.adb.errors import AdbError

from .client import ControlPlane, Rejected, Uncertain

log = logging.getLogger("amc.agent.registry")
T = TypeVar("T")


class Blocking(Protocol):
    """Runs a blocking function off the event loop, for any result type."""

    def __call__(self, function: Callable[[], T], /) -> Awaitable[T]: ...


class RegistrationRefused(Exception):
    """The server refused this host's registration for good (401, 403): check token and host id."""


class Registry:
    """Scans adb for devices and registers them with the control plane.

    Args:
        adb: the adb server connection.
        server: the control plane client.
        blocking: runs a blocking function off the event loop (adb calls block).
        timeout: deadline of each adb call during a scan.
    """

    def __init__(self, adb: BoundedClient, server: ControlPlane, blocking: Blocking, *, timeout: float = 10.0):
        self._adb = adb
        self._server = server
        self._blocking = blocking
        self._timeout = timeout
        self._attributes: dict[str, dict[str, str]] = {}
        self.registered: tuple[DeviceInfo, ...] | None = None  # what the server last accepted
        self._trouble: dict[str, str] = {}  # "adb", "server" or a serial -> the problem logged when it began

    def scan(self) -> list[DeviceInfo]:
        """The usable devices now, in adb's order (blocking; raises AdbError if adb cannot answer)."""
        serials = list_serials(self._adb, timeout=self._timeout)
        for gone in set(self._attributes) - set(serials):
            del self._attributes[gone]  # re-read when it comes back: it may be another phone
        devices = []
        for serial in serials:
            if serial not in self._attributes:
                try:
                    self._attributes[serial] = read_attributes(self._adb, serial, timeout=self._timeout)
                except AdbError as error:
                    self._complain(serial, f"device {serial} does not answer ({error.reason}); leaving it out")
                    continue
                self._complain(serial, None)
            devices.append(DeviceInfo(serial, dict(self._attributes[serial])))
        return devices

    async def refresh(self) -> tuple[DeviceInfo, ...] | None:
        """Scan and, if the inventory changed, register it; the inventory the server holds now.

        Returns None while no registration has succeeded yet, and when adb cannot be asked
        (nothing is known of the devices now; the server keeps the last inventory).
        """
        try:
            devices = tuple(await self._blocking(self.scan))
        except AdbError as error:
            self._complain("adb", f"cannot list devices from adb ({error.reason}); keeping the last inventory")
            return None
        self._complain("adb", None)
        if devices == self.registered:
            return self.registered
        try:
            await self._server.register(list(devices))
        except Rejected as error:
            if error.status in (401, 403) and self.registered is None:
                raise RegistrationRefused(str(error)) from None  # misconfigured from the start
            self._complain("server", f"registration refused ({error}); retrying at the next scan", logging.ERROR)
            return self.registered
        except Uncertain as error:
            self._complain("server", f"registration got no answer ({error}); retrying at the next scan")
            return self.registered
        self._complain("server", None)
        log.info(
            "registered %d device(s): %s",
            len(devices),
            ", ".join(f"{d.serial} ({d.attributes.get('model', '?')})" for d in devices) or "none",
        )
        self.registered = devices
        return devices

    def _complain(self, source: str, problem: str | None, level: int = logging.WARNING) -> None:
        """Log a problem of `source` when it starts (not at every scan), and when it is over."""
        if problem is None:
            if self._trouble.pop(source, None) is not None:
                log.info("%s: working again", source)
        elif source not in self._trouble:
            log.log(level, "%s", problem)
            self._trouble[source] = problem
