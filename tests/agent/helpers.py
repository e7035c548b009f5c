"""Test helpers for the Host Agent: plan steps, an agent in a thread, a TCP proxy.

Everything goes over real sockets: the agent talks HTTP to a real uvicorn server (maybe
through `TcpProxy`), and ADB to the device simulator.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import shlex
import socket
import threading
import time
from typing import Any

from amc.adapters.adb.client import BoundedClient
from amc.adapters.adb.policy import ActionPolicy
from amc.agent.config import AgentConfig
from amc.agent.host import HostAgent
from tests.support.waiting import eventually, free_port  # noqa: F401  (re-exported for the tests here)


def shell(step_id: str, command: str, **args: Any) -> dict:
    return {"id": step_id, "action": "shell", "args": {"command": command, **args}}


def tap(step_id: str, x: int = 10, y: int = 20) -> dict:
    return {"id": step_id, "action": "tap", "args": {"x": x, "y": y}}


def echo(step_id: str) -> dict:
    """A shell step the device log shows as ``echo <step id>``."""
    return shell(step_id, f"echo {step_id}")


class AgentThread:
    """A `HostAgent` running on its own event loop in a background thread."""

    def __init__(self, config: AgentConfig, adb: BoundedClient, policy: ActionPolicy | None = None):
        self.agent = HostAgent(config, adb=adb, policy=policy)
        self.error: BaseException | None = None
        self._thread = threading.Thread(target=self._main, name=f"agent-{config.host_id}", daemon=True)

    def _main(self) -> None:
        try:
            asyncio.run(self.agent.run())
        except BaseException as error:  # reported by stop()
            self.error = error

    def start(self) -> AgentThread:
        self._thread.start()
        eventually(lambda: self.agent._loop is not None or not self._thread.is_alive(), 5)
        return self

    @property
    def records(self):
        return list(self.agent.records)

    def record(self, task_id: str, timeout: float = 15.0):
        """The agent's record of the attempt of `task_id` it finished (its report answered)."""
        return eventually(
            lambda: next((r for r in self.records if r.task_id == task_id), None),
            timeout,
            what=f"a finished attempt of {task_id}",
        )

    def stop(self, timeout: float = 15.0, force: bool = False) -> None:
        if self._thread.is_alive():
            self.agent.request_stop(force)
            self._thread.join(timeout)
        assert not self._thread.is_alive(), "the agent did not stop"
        if self.error is not None:
            raise self.error


class TcpProxy:
    """A TCP relay in front of the server that a test can pause, or make lose a response.

    - `pause()`: the server becomes unreachable: nothing is relayed in either direction,
      new connections are accepted and held (so requests hang, as behind a dead link).
    - `resume()`: every connection that lived through the pause is closed (what it carried
      is lost), and relaying starts again for new connections.
    - `drop_response(marker)`: the next request whose bytes contain `marker` reaches the
      server, but its response never reaches the client: the connection is cut instead.
    - `hold(marker)`: requests whose bytes contain `marker` wait until `release()`.
    - `retarget(port)`: relay new connections to another port (a restarted server).
    """

    def __init__(self, target_port: int):
        self.target = ("127.0.0.1", target_port)
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self._lock = threading.Lock()
        self._paused = threading.Event()
        self._closed = False
        self._drop_marker: bytes | None = None
        self._hold_marker: bytes | None = None
        self._released = threading.Event()
        self.held = 0
        self.dropped = 0
        self._connections: list[_Relay] = []
        threading.Thread(target=self._accept, name="proxy-accept", daemon=True).start()

    def pause(self) -> None:
        self._paused.set()

    def resume(self) -> None:
        with self._lock:
            stale = [c for c in self._connections if c.saw_pause]
        for relay in stale:
            relay.close()
        self._paused.clear()

    def retarget(self, port: int) -> None:
        self.target = ("127.0.0.1", port)

    def drop_response(self, marker: bytes) -> None:
        self._drop_marker = marker

    def hold(self, marker: bytes) -> None:
        self._released.clear()
        self._hold_marker = marker

    def release(self) -> None:
        self._hold_marker = None
        self._released.set()

    def _wait_if_held(self, data: bytes) -> None:
        if self._hold_marker is not None and self._hold_marker in data:
            self.held += 1
            self._released.wait(30)

    def close(self) -> None:
        self._closed = True
        self._released.set()
        self._listener.close()
        with self._lock:
            connections = list(self._connections)
        for relay in connections:
            relay.close()

    @property
    def paused(self) -> bool:
        return self._paused.is_set()

    def _take_drop(self, data: bytes) -> bool:
        with self._lock:
            if self._drop_marker is not None and self._drop_marker in data:
                self._drop_marker = None
                self.dropped += 1
                return True
        return False

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            relay = _Relay(self, client)
            with self._lock:
                self._connections.append(relay)
            threading.Thread(target=relay.run, daemon=True).start()


class _Relay:
    def __init__(self, proxy: TcpProxy, client: socket.socket):
        self.proxy = proxy
        self.client = client
        self.server: socket.socket | None = None
        self.saw_pause = False
        self.dropping = False

    def run(self) -> None:
        while self.proxy.paused:  # a connection made during a pause goes nowhere
            self.saw_pause = True
            time.sleep(0.01)
        if self.saw_pause:
            return self.close()
        try:
            self.server = socket.create_connection(self.proxy.target)
        except OSError:
            return self.close()
        threading.Thread(target=self._pump, args=(self.server, self.client, False), daemon=True).start()
        self._pump(self.client, self.server, True)

    def _pump(self, source: socket.socket, sink: socket.socket, upstream: bool) -> None:
        try:
            while True:
                data = source.recv(65536)
                if not data:
                    break
                while self.proxy.paused:
                    self.saw_pause = True
                    time.sleep(0.01)
                if self.saw_pause:
                    break
                if upstream:
                    self.proxy._wait_if_held(data)
                if upstream and self.proxy._take_drop(data):
                    self.dropping = True
                elif not upstream and self.dropping:
                    break  # the server answered the marked request: lose the answer
                sink.sendall(data)
        except OSError:
            pass
        self.close()

    def close(self) -> None:
        for sock in (self.client, self.server):
            if sock is not None:
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)
                with contextlib.suppress(OSError):
                    sock.close()


_SUPERVISED = re.compile(r"^sh -c (?P<quoted>.*) amc-step-[0-9a-f]+; echo amc-exit-[0-9a-f]+:\$\?$")
DISCOVERY = ("getprop", "wm size")  # what reading a device's attributes sends


def device_log(sim, serial: str) -> list:
    """The records of the commands a plan sent to the device (attribute reads left out)."""
    return [r for r in sim.log(serial) if r.service == "shell" and r.command not in DISCOVERY]


def unwrap(command: str) -> str:
    """A supervised shell step's payload as the plan wrote it; other commands unchanged."""
    match = _SUPERVISED.match(command)
    return shlex.split(match.group("quoted"))[0] if match else command


def device_commands(sim, serial: str) -> list[tuple[str, str]]:
    """(command as planned, how it ended) for each plan command the device received, in order."""
    return [(unwrap(r.command), r.end) for r in device_log(sim, serial)]


def commands(sim, serial: str) -> list[str]:
    """Each plan command the device received, as planned, in order."""
    return [command for command, _ in device_commands(sim, serial)]


def wait_running(sim, serial: str, command: str, timeout: float = 20.0):
    """Wait until the device runs `command` (as planned); its log record."""
    return eventually(
        lambda: next((r for r in device_log(sim, serial) if unwrap(r.command) == command and r.end == "running"), None),
        timeout,
        what=f"{command!r} running on {serial}",
    )


def outcomes(steps: list[dict]) -> list[tuple]:
    """(id, status, reason) of each reported step."""
    return [(s["id"], s["status"], s.get("reason")) for s in steps]
