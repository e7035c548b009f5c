"""The local stack of `amc up` and `amc demo`: a control plane, devices and Host Agents,
started together and stopped in the right order.

The server and the agents run as child processes (`python -m amc serve`, `python -m amc
host run`), exactly the programs an operator would run, so the stack exercises the real
command lines and a Host Agent can be killed like a crashed machine. Simulated devices run
in this process (`Simulator`), so their command logs can be read directly.

Theory of operation:

- Children start in a session of their own, so a Ctrl-C at the terminal reaches only this
  process, which then stops them in order: the agents first, then the server (SIGTERM: it
  finishes in-flight requests and closes the store), then the simulators.
- The agents drain (`stop()`): one SIGTERM each, so each stops claiming and lets running
  tasks finish within its drain time; then each task still running stops at its next step
  boundary and its attempt is released, for the server to requeue. `stop(force=True)`
  (or a drain that outlasts its bound) sends the second SIGTERM: running steps are
  interrupted and their attempts released now. Whatever is still alive after that is
  killed; `kill()` kills everything at once.
- On Linux each child asks the kernel for SIGTERM when its parent dies (PR_SET_PDEATHSIG,
  set in a tiny launcher before it execs), so even a SIGKILLed `amc up` leaves nothing
  behind.
- Each child's output (stdout and stderr together) is read by a thread, handed line by
  line to a sink (the terminal for `up`, a log file for `demo`), and its last lines are
  kept for the error message when a child fails to start or dies.
- The children get a clean environment: every AMC_* variable of the caller is removed, and
  the stack passes what they need explicitly (a host token only in AMC_HOST_TOKEN, never in
  arguments, which other users can read).
"""

from __future__ import annotations

import collections
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from amc.cli.client import ApiClient, ApiError, Refused

Sink = Callable[[str, str], None]  # (child name, one line of its output)

# The launcher asks for SIGTERM when the parent dies, checks the parent has not died
# already (the request came too late then), and becomes `python -m amc ...`.
_LAUNCHER = (
    "import ctypes, os, sys\n"
    "try:\n"
    "    ctypes.CDLL(None, use_errno=True).prctl(1, 15)  # PR_SET_PDEATHSIG, SIGTERM\n"
    "except Exception:\n"
    "    pass\n"
    "if os.getppid() != int(sys.argv[1]):\n"
    "    sys.exit(1)\n"
    "os.execv(sys.executable, [sys.executable, '-m', 'amc', *sys.argv[2:]])\n"
)

_LISTENING = re.compile(r"listening on (http://\S+)")


class StackError(Exception):
    """The stack could not start or lost a part; the message is one line for people."""


class Child:
    """One child process of the stack, with its output pumped to a sink."""

    def __init__(self, name: str, args: Sequence[str], *, env: dict[str, str], sink: Sink):
        self.name = name
        self.tail: collections.deque[str] = collections.deque(maxlen=40)
        self._lines = threading.Condition()
        if sys.platform.startswith("linux"):
            command = [sys.executable, "-c", _LAUNCHER, str(os.getpid()), *args]
        else:
            command = [sys.executable, "-m", "amc", *args]
        self.process = subprocess.Popen(
            command,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        self._sink = sink
        self.terms = 0  # SIGTERMs sent: to an agent, the first drains and the second stops it now
        self._pump = threading.Thread(target=self._read, name=f"amc-stack-{name}", daemon=True)
        self._pump.start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for raw in self.process.stdout:
            line = raw.decode("utf-8", "replace").rstrip("\r\n")
            with self._lines:
                self.tail.append(line)
                self._lines.notify_all()
            try:
                self._sink(self.name, line)
            except Exception:  # a closed terminal must not stop the pump (the child would block)
                pass
        with self._lines:
            self._lines.notify_all()

    @property
    def alive(self) -> bool:
        return self.process.poll() is None

    @property
    def pid(self) -> int:
        return self.process.pid

    def last_words(self) -> str:
        """The child's most telling recent line: its last error line, else its last line."""
        lines = [line.strip() for line in self.tail if line.strip()]
        errors = [line for line in lines if line.startswith("Error:") or "ERROR" in line or "Error" in line]
        last = (errors or lines or ["(no output)"])[-1]
        return last.removeprefix("Error:").strip()  # it becomes part of our own error line

    def wait_for_line(self, pattern: re.Pattern, timeout: float) -> re.Match:
        """The first output line matching `pattern`; StackError if the child exits or times out first."""
        deadline = time.monotonic() + timeout
        checked = 0
        with self._lines:
            while True:
                lines = list(self.tail)
                for line in lines[checked:] if len(lines) > checked else []:
                    match = pattern.search(line)
                    if match:
                        return match
                checked = len(lines)
                if not self.alive and not self._pump.is_alive():
                    raise StackError(f"the {self.name} exited (status {self.process.returncode}): {self.last_words()}")
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise StackError(f"the {self.name} did not start within {timeout:g} s: {self.last_words()}")
                self._lines.wait(min(remaining, 0.2))

    def signal(self, signum: int) -> None:
        if self.alive:
            try:
                self.process.send_signal(signum)
            except ProcessLookupError:
                pass

    def terminate(self, times: int = 1) -> None:
        """Send SIGTERM until this child has had `times` of them."""
        while self.terms < times and self.alive:
            self.terms += 1
            self.signal(signal.SIGTERM)

    def wait(self, timeout: float) -> bool:
        """Whether the child exited within `timeout` seconds."""
        try:
            self.process.wait(max(0.0, timeout))
        except subprocess.TimeoutExpired:
            return False
        self._pump.join(2)
        return True

    def kill(self) -> None:
        self.signal(signal.SIGKILL)
        self.wait(5)

    def stop(self, grace: float) -> int | None:
        """SIGTERM, then SIGKILL after `grace` seconds; the exit status."""
        self.terminate()
        if not self.wait(grace):
            self.kill()
        return self.process.returncode


def child_env(**extra: str) -> dict[str, str]:
    """The caller's environment without AMC_* settings, plus `extra`, unbuffered."""
    env = {key: value for key, value in os.environ.items() if not key.startswith("AMC_")}
    env["PYTHONUNBUFFERED"] = "1"
    env.update(extra)
    return env


class Stack:
    """The processes and simulators of one local stack; stop() (or `with`) ends them all.

    Args:
        sink: receives every output line of every child, with the child's name.
    """

    DRAIN_MARGIN = 15.0  # after its drain time, an agent's steps under way end and its releases are answered
    FORCE_GRACE = 10.0  # after the second SIGTERM: steps interrupted, releases answered (an agent gives up after 5 s)
    SERVER_GRACE = 10.0

    def __init__(self, sink: Sink):
        self.sink = sink
        self.server: Child | None = None
        self.url: str | None = None
        self.agents: dict[str, Child] = {}
        self.drain_timeout = 0.0  # the longest drain time of the agents started
        self.simulators: list = []

    def __enter__(self) -> Stack:
        return self

    def __exit__(self, *exc_info) -> None:
        self.stop()

    # -- starting ------------------------------------------------------------------------

    def start_server(
        self,
        data: Path,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        tokens: Path | None = None,
        lease_seconds: float | None = None,
        host_timeout: float | None = None,
        log_level: str = "warning",
        timeout: float = 30.0,
    ) -> str:
        """Start `amc serve` on `data`; its base URL once it answers /v1/health."""
        args = ["serve", "--data", str(data), "--host", host, "--port", str(port), "--log-level", log_level]
        if tokens is not None:
            args += ["--tokens", str(tokens)]
        if lease_seconds is not None:
            args += ["--lease-seconds", f"{lease_seconds:g}", "--min-lease-seconds", f"{min(1.0, lease_seconds):g}"]
        if host_timeout is not None:
            args += ["--host-timeout", f"{host_timeout:g}"]
        self.server = Child("server", args, env=child_env(), sink=self.sink)
        self.url = self.server.wait_for_line(_LISTENING, timeout).group(1)
        return self.url

    def start_simulator(self, devices):
        """Simulated devices (a count or `SimDeviceSpec`s) in this process; the started Simulator."""
        from amc.sim import Simulator

        simulator = Simulator(devices).start()
        self.simulators.append(simulator)
        return simulator

    def start_agent(
        self,
        host_id: str,
        token: str,
        *,
        adb_port: int,
        adb_host: str = "127.0.0.1",
        keep_artifacts: Path | None = None,
        lease_seconds: float | None = None,
        claim_wait: float = 5.0,
        scan_seconds: float = 1.0,
        drain_timeout: float = 60.0,
        log_level: str = "info",
    ) -> Child:
        """Start `amc host run` for `host_id` (the token goes in the environment)."""
        assert self.url is not None, "start the server first"
        args = [
            "host",
            "run",
            "--server",
            self.url,
            "--host-id",
            host_id,
            "--adb-host",
            adb_host,
            "--adb-port",
            str(adb_port),
            "--claim-wait",
            f"{claim_wait:g}",
            "--scan-seconds",
            f"{scan_seconds:g}",
            "--drain-timeout",
            f"{drain_timeout:g}",
            "--log-level",
            log_level,
        ]
        if lease_seconds is not None:
            args += ["--lease-seconds", f"{lease_seconds:g}"]
        if keep_artifacts is not None:
            args += ["--keep-artifacts", str(keep_artifacts)]
        agent = Child(host_id, args, env=child_env(AMC_HOST_TOKEN=token), sink=self.sink)
        self.agents[host_id] = agent
        self.drain_timeout = max(self.drain_timeout, drain_timeout)
        return agent

    def wait_registered(self, client: ApiClient, host_id: str, devices: int = 1, timeout: float = 30.0) -> dict:
        """The host once it has registered at least `devices` online devices."""
        deadline = time.monotonic() + timeout
        agent = self.agents.get(host_id)
        while True:
            try:
                host = client.host(host_id)
                if sum(1 for device in host["devices"] if device["online"]) >= devices:
                    return host
            except Refused as error:
                if error.status != 404:
                    raise StackError(f"cannot read host {host_id}: {error.message}") from None
            except ApiError as error:
                raise StackError(f"cannot read host {host_id}: {error.message}") from None
            if agent is not None and not agent.alive:
                raise StackError(
                    f"the Host Agent {host_id} exited (status {agent.process.returncode}): {agent.last_words()}"
                )
            if time.monotonic() > deadline:
                why = agent.last_words() if agent is not None else "no agent"
                raise StackError(f"host {host_id} did not register {devices} device(s) within {timeout:g} s: {why}")
            time.sleep(0.1)

    def check(self) -> None:
        """StackError if the server died (agents may be stopped on purpose)."""
        if self.server is not None and not self.server.alive:
            raise StackError(f"the server exited (status {self.server.process.returncode}): {self.server.last_words()}")

    # -- stopping ------------------------------------------------------------------------

    def stop(self, *, force: bool = False) -> None:
        """Agents (drained, or with force stopped now), then the server, then the simulators.

        A call interrupted by KeyboardInterrupt may be followed by `stop(force=True)`, which
        picks up where it was: agents that had their first SIGTERM get the second one."""
        agents = [agent for agent in self.agents.values() if agent.alive]
        if not force:
            for agent in agents:  # all at once: they drain in parallel
                agent.terminate()
            deadline = time.monotonic() + self.drain_timeout + self.DRAIN_MARGIN
            for agent in agents:
                agent.wait(deadline - time.monotonic())
        agents = [agent for agent in agents if agent.alive]
        for agent in agents:  # the second SIGTERM: interrupt and release now
            agent.terminate(times=2)
        deadline = time.monotonic() + self.FORCE_GRACE
        for agent in agents:
            if not agent.wait(deadline - time.monotonic()):
                agent.kill()
        if self.server is not None:
            self.server.stop(self.SERVER_GRACE)
        self._stop_simulators()

    def kill(self) -> None:
        """Kill every child now (their leases run out on a server that outlives them)."""
        for child in [*self.agents.values(), *([self.server] if self.server is not None else [])]:
            if child.alive:
                child.kill()
        self._stop_simulators()

    def _stop_simulators(self) -> None:
        for simulator in self.simulators:
            simulator.stop()
        self.simulators.clear()


def attached_devices(adb_host: str, adb_port: int) -> list[str] | None:
    """Serials of the devices a running adb server sees; None when no adb server answers.

    Never starts an adb server: `amc up` should not leave a daemon behind on a machine
    that has no phones.
    """
    from amc.adapters.adb.client import BoundedClient
    from amc.adapters.adb.discovery import list_serials
    from amc.adapters.adb.errors import AdbError

    try:
        return list_serials(BoundedClient(adb_host, adb_port, io_timeout=3.0), timeout=5.0)
    except AdbError:
        return None
