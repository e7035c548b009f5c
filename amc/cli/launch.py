"""The launcher of a local amc: a control plane, devices and Host Agents, started together
and stopped in the right order. `amc up`, `amc demo`, the benchmarks and the tests start
amc through it, and only through it.

The server and the agents run as child processes (`python -m amc serve`, `python -m amc
host run`), exactly the programs an operator would run, so the stack exercises the real
command lines and a Host Agent can be killed like a crashed machine. Simulated devices run
in this process (`Simulator`), so their command logs can be read directly.

Theory of operation:

- A server is found through the record it writes beside its tokens file (`server.json`:
  its URL and process id, written once it listens), never through its output: `Server`
  waits for the record that carries its own child's process id (an older one may be left
  by a killed server), and fails with the child's last lines when it exits first.
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
  set in a tiny launcher before it execs, which keeps the process id), so even a SIGKILLed
  `amc up` leaves nothing behind.
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
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Required, TypedDict, Unpack

from amc.cli.client import TOKENS_FILE, ApiClient, ApiError, Refused, read_server_file

if TYPE_CHECKING:
    from amc.sim import SimDeviceSpec, Simulator

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


class LaunchError(Exception):
    """A part could not start or was lost; the message is one line for people, and `tail`
    holds the last output lines of the child concerned (empty when there is none)."""

    def __init__(self, message: str, tail: Sequence[str] = ()):
        super().__init__(message)
        self.tail = tuple(tail)

    def report(self) -> str:
        """The message and the child's last lines, for a log or a failed test."""
        return "\n".join([str(self), *(f"  | {line}" for line in self.tail)])


def _ignore(name: str, line: str) -> None:
    """The sink of a child whose output matters only when it fails (its tail is kept)."""


class Child:
    """One child process, `python -m amc ARGS`, with its output pumped to a sink.

    `process` is the child's `Popen`; its process id is the one `amc` runs under.
    """

    def __init__(self, name: str, args: Sequence[str], *, env: dict[str, str], sink: Sink = _ignore):
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
        self._pump = threading.Thread(target=self._read, name=f"amc-{name}", daemon=True)
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

    def exited(self) -> LaunchError:
        """The error to raise when this child exited though it should not have."""
        return LaunchError(f"the {self.name} exited (status {self.process.returncode}): {self.last_words()}", self.tail)

    def wait_until(self, ready: Callable[[], bool], timeout: float) -> None:
        """Return once `ready()` holds, checked at each output line and every 50 ms;
        LaunchError if the child exits (with all its output read) or `timeout` runs out first."""
        deadline = time.monotonic() + timeout
        with self._lines:
            while not ready():
                if not self.alive and not self._pump.is_alive():
                    raise self.exited()
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise LaunchError(
                        f"the {self.name} did not start within {timeout:g} s: {self.last_words()}", self.tail
                    )
                self._lines.wait(min(remaining, 0.05))

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
        """Whether the child exited within `timeout` seconds (its output all read then)."""
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


class Server(Child):
    """`amc serve --data DATA OPTIONS...` as a child process, and the URL it serves on.

    The URL comes from the `server.json` the server writes beside its tokens file once it
    listens (DATA/tokens.json, or `tokens`: pass a tokens file here, not in `options`, so the
    record is looked for in the right directory). LaunchError, with the child's last lines,
    when it exits first or `timeout` runs out (the child is killed then).
    """

    def __init__(
        self,
        data: Path,
        *options: str,
        tokens: Path | None = None,
        host: str = "127.0.0.1",
        port: int = 0,
        log_level: str = "warning",
        env: dict[str, str] | None = None,
        sink: Sink = _ignore,
        timeout: float = 30.0,
        name: str = "server",
    ):
        args = ["serve", "--data", str(data), "--host", host, "--port", str(port), "--log-level", log_level]
        if tokens is not None:
            args += ["--tokens", str(tokens)]
        super().__init__(name, [*args, *options], env=child_env() if env is None else env, sink=sink)
        self.tokens = data / TOKENS_FILE if tokens is None else tokens
        self.url = ""
        try:
            self.wait_until(self._recorded, timeout)
        except LaunchError:
            self.kill()
            raise

    def _recorded(self) -> bool:
        """Whether this child has written its record (an older server's may still be there)."""
        record = read_server_file(self.tokens.parent)
        if record is None or record[1] != self.pid:
            return False
        self.url = record[0]
        return True


class AgentOptions(TypedDict, total=False):
    """How a Host Agent runs besides its server and host; left out, the launcher's default."""

    adb_port: Required[int]  # the adb server whose devices it serves
    adb_host: str  # 127.0.0.1
    keep_artifacts: Path | None  # also keep a copy of each step's evidence here (None: no copy)
    lease_seconds: float  # the agent's own default
    claim_wait: float  # 5 s: shorter than the agent's long poll, so a stack reacts quickly
    scan_seconds: float  # 1 s
    log_level: str  # info
    drain_timeout: float  # 60 s: at its first SIGTERM, how long running tasks may go on to finish
    record_history: Path | None  # append its claims, starts, renewals, results and releases here (None: no record)


class Agent(Child):
    """`amc host run` as a child process, serving the devices of one adb server for `host_id`
    (the token goes in the environment, never in the arguments); named after the host."""

    def __init__(self, server: str, host_id: str, token: str, *, sink: Sink = _ignore, **options: Unpack[AgentOptions]):
        self.drain_timeout = options.get("drain_timeout", 60.0)
        args = ["host", "run", "--server", server, "--host-id", host_id]
        args += ["--adb-host", options.get("adb_host", "127.0.0.1"), "--adb-port", str(options["adb_port"])]
        args += ["--claim-wait", f"{options.get('claim_wait', 5.0):g}"]
        args += ["--scan-seconds", f"{options.get('scan_seconds', 1.0):g}"]
        args += ["--drain-timeout", f"{self.drain_timeout:g}", "--log-level", options.get("log_level", "info")]
        if "lease_seconds" in options:
            args += ["--lease-seconds", f"{options['lease_seconds']:g}"]
        record_history = options.get("record_history")
        if record_history is not None:
            args += ["--record-history", str(record_history)]
        keep_artifacts = options.get("keep_artifacts")
        if keep_artifacts is not None:
            args += ["--keep-artifacts", str(keep_artifacts)]
        super().__init__(host_id, args, env=child_env(AMC_HOST_TOKEN=token), sink=sink)


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

    def __init__(self, sink: Sink = _ignore):
        self.sink = sink
        self.server: Server | None = None
        self.agents: dict[str, Agent] = {}
        self.drain_timeout = 0.0  # the longest drain time of the agents started
        self.simulators: list[Simulator] = []

    @property
    def url(self) -> str | None:
        """The server's base URL once it serves."""
        return None if self.server is None else self.server.url

    def __enter__(self) -> Stack:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    # -- starting ------------------------------------------------------------------------

    def start_server(
        self,
        data: Path,
        *options: str,
        host: str = "127.0.0.1",
        port: int = 0,
        tokens: Path | None = None,
        lease_seconds: float | None = None,
        host_timeout: float | None = None,
        log_level: str = "warning",
        timeout: float = 30.0,
    ) -> str:
        """Start `amc serve` on `data` (with `options` besides); its base URL once it serves."""
        args = list(options)
        if lease_seconds is not None:
            args += ["--lease-seconds", f"{lease_seconds:g}", "--min-lease-seconds", f"{min(1.0, lease_seconds):g}"]
        if host_timeout is not None:
            args += ["--host-timeout", f"{host_timeout:g}"]
        self.server = Server(
            data, *args, tokens=tokens, host=host, port=port, log_level=log_level, sink=self.sink, timeout=timeout
        )
        return self.server.url

    def start_simulator(self, devices: int | Sequence[SimDeviceSpec]) -> Simulator:
        """Simulated devices (a count or `SimDeviceSpec`s) in this process; the started Simulator."""
        from amc.sim import Simulator

        simulator = Simulator(devices).start()
        self.simulators.append(simulator)
        return simulator

    def start_agent(self, host_id: str, token: str, **options: Unpack[AgentOptions]) -> Agent:
        """Start `amc host run` for `host_id` against this stack's server."""
        assert self.url is not None, "start the server first"
        agent = Agent(self.url, host_id, token, sink=self.sink, **options)
        self.agents[host_id] = agent
        self.drain_timeout = max(self.drain_timeout, agent.drain_timeout)
        return agent

    def wait_registered(
        self, client: ApiClient, host_id: str, devices: int = 1, timeout: float = 30.0
    ) -> dict[str, Any]:
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
                    raise LaunchError(f"cannot read host {host_id}: {error.message}") from None
            except ApiError as error:
                raise LaunchError(f"cannot read host {host_id}: {error.message}") from None
            if agent is not None and not agent.alive:
                raise LaunchError(
                    f"the Host Agent {host_id} exited (status {agent.process.returncode}): {agent.last_words()}",
                    agent.tail,
                )
            if time.monotonic() > deadline:
                why = agent.last_words() if agent is not None else "no agent"
                raise LaunchError(f"host {host_id} did not register {devices} device(s) within {timeout:g} s: {why}")
            time.sleep(0.1)

    def check(self) -> None:
        """LaunchError if the server died (agents may be stopped on purpose)."""
        if self.server is not None and not self.server.alive:
            raise self.server.exited()

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
