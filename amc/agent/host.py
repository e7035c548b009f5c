"""`HostAgent`: the supervisor of one host: devices, slots, and a graceful stop.

    agent = HostAgent(AgentConfig(server=URL, token=T, host_id="h1"))
    await agent.run()        # until agent.stop() (from the loop) or request_stop() (any thread)

What it does, on one asyncio event loop:

- every `scan_seconds`, asks adb which devices are attached and registers the inventory
  when it changed (`registry`);
- keeps one `DeviceSlot` per registered device, which claims, runs and reports attempts
  one after another (`slot`, `worker`);
- runs the blocking adb work (scans, steps) in a thread pool, so the loop stays free for
  lease renewals.

Stopping (SIGTERM or SIGINT in `amc host run`) is a drain, so a redeploy fails no work:

- `stop()` calls off every pending claim; running attempts go on, and one that finishes
  within `drain_seconds` reports its result as usual. When the drain time runs out, every
  attempt still running gets the stop `drain_timed_out`: it stops at its next step boundary
  (the running step may finish) and gives the attempt back with a release (reason
  ``host_stopping``), so the server requeues the task for another host at once.
- `stop(force=True)` (a second signal) puts `forced_stop` on every running attempt: the
  running step is interrupted now, and the attempt is released with its steps' truthful
  outcomes. The releases are tried for `forced_release_seconds`; whatever is still
  unanswered then is abandoned (its lease runs out on the server instead). A third
  `stop(force=True)` abandons at once.
- `run()` returns when every attempt has had its result or release answered (or was
  abandoned).

An attempt whose claim was answered just as the host began to stop runs no step: it is
released at once.
"""

from __future__ import annotations

import asyncio
import collections
import concurrent.futures
import logging
import socket
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import httpx

from amc.adapters.adb.client import BoundedClient
from amc.adapters.adb.executor import AdbExecutor
from amc.adapters.adb.policy import ActionPolicy
from amc.check.recorder import HistoryFile, RecordingTransport
from amc.core.execution import StopReason

from .attempt import Attempt
from .client import ControlPlane
from .clock import ServerClock
from .config import AgentConfig
from .inputs import InputCache
from .registry import Registry
from .slot import DeviceSlot
from .wire import ClaimedAttempt
from .worker import AttemptRecord

log = logging.getLogger("amc.agent")
RECORDS_KEPT = 256


def recording_transport(history: HistoryFile, host_id: str) -> httpx.AsyncBaseTransport:
    """A TCP transport whose claims, starts, renewals, results and releases are recorded.

    Given a transport, the control plane's channels share one connection pool (rather than
    one per device): a recorded run pays that, an ordinary one is not touched."""
    inner = httpx.AsyncHTTPTransport(
        socket_options=[(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)],
        limits=httpx.Limits(max_connections=None, max_keepalive_connections=64),
    )
    return RecordingTransport(inner, history, host_id)


T = TypeVar("T")


class HostAgent:
    """Runs one host's devices for the control plane.

    Args:
        config: server, identity, adb address and pacing.
        policy: the host's action policy; None allows every action.
        adb: an adb server connection to use instead of one made from the config.
    """

    def __init__(self, config: AgentConfig, *, policy: ActionPolicy | None = None, adb: BoundedClient | None = None):
        self.config = config
        self.policy = policy
        self.adb = adb or BoundedClient(config.adb_host, config.adb_port)
        # The latest finished attempts, in the order they ended (for logs, tests and benchmarks);
        # bounded, as every one of them holds its whole report: the soak saw an agent grow by
        # ~3 KiB per attempt for as long as it ran when this kept them all.
        self.records: collections.deque[AttemptRecord] = collections.deque(maxlen=RECORDS_KEPT)
        self.slots: dict[str, DeviceSlot] = {}
        self.server: ControlPlane | None = None
        self.inputs: InputCache | None = None
        self.pool: concurrent.futures.ThreadPoolExecutor | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stopping = asyncio.Event()  # binds to the loop that first waits on it
        self._forced = False
        self._drained = False  # the drain time ran out
        self._timers: list[asyncio.TimerHandle] = []

    # -- control ------------------------------------------------------------------------------

    @property
    def stopping(self) -> bool:
        return self._stopping.is_set()

    def stop(self, force: bool = False) -> None:
        """Drain (or, with force, stop now); call on the agent's event loop."""
        loop = asyncio.get_running_loop()
        if not self._stopping.is_set():
            log.info(
                "stopping: no more claims; running attempts may finish within %g s, then stop at their "
                "next step boundary and are released to another host (signal again to stop now)",
                self.config.drain_seconds,
            )
            self._stopping.set()
            for slot in self.slots.values():
                slot.retire()
                if slot.attempt is not None and slot.attempt.assignment.session:
                    # A session has no end of its own to wait for: it stops after the running
                    # action and is released at once (Part D).
                    slot.attempt.stop(StopReason.drain_timed_out, "the host agent is stopping")
            self._timers.append(loop.call_later(self.config.drain_seconds, self._drain_ended))
        if not force:
            return
        if self._forced:
            self._abandon()
            return
        log.warning("stopping now: interrupting running steps and releasing their attempts")
        self._forced = True
        for slot in self.slots.values():
            if slot.attempt is not None:
                slot.attempt.stop(*self.stop_reason())
        self._timers.append(loop.call_later(self.config.forced_release_seconds, self._abandon))

    def stop_reason(self) -> tuple[StopReason, str]:
        """The stop for an attempt of this host while it is stopping."""
        if self._forced:
            return StopReason.forced_stop, "the host agent was told to stop now"
        if self._drained:
            return (
                StopReason.drain_timed_out,
                f"the host agent stopped; its {self.config.drain_seconds:g} s drain ran out",
            )
        return StopReason.drain_timed_out, "the attempt was assigned while the host agent was stopping"

    def _drain_ended(self) -> None:
        self._drained = True
        running = [slot.attempt for slot in self.slots.values() if slot.attempt is not None]
        if running:
            log.info("the drain time ran out: %d running attempt(s) stop at their next step boundary", len(running))
        for attempt in running:
            attempt.stop(*self.stop_reason())

    def _abandon(self) -> None:
        """Give up on whatever still runs (releases unanswered: their leases run out)."""
        if any(not slot.done for slot in self.slots.values()):
            log.warning("abandoning what is still running; its leases run out on the server")
        for slot in self.slots.values():
            slot.task.cancel()

    def request_stop(self, force: bool = False) -> None:
        """`stop()` from any thread."""
        if self._loop is not None:
            self._loop.call_soon_threadsafe(self.stop, force)

    # -- running ------------------------------------------------------------------------------

    async def run(self) -> None:
        """Serve until stopped; raises RegistrationRefused if the server refuses this host."""
        self._loop = asyncio.get_running_loop()
        config = self.config
        self.pool = concurrent.futures.ThreadPoolExecutor(max_workers=256, thread_name_prefix="amc-adb")
        history = None if config.record_history is None else HistoryFile(config.record_history)
        self.server = ControlPlane(
            config.server,
            config.token,
            config.host_id,
            timeout=config.request_timeout,
            transport=None if history is None else recording_transport(history, config.host_id),
        )
        cache_dir = config.input_cache or Path(tempfile.gettempdir()) / "amc-inputs"
        self.inputs = InputCache(cache_dir, config.server, config.token, max_bytes=config.input_cache_bytes)
        registry = Registry(self.adb, self.server, self.blocking)
        log.info(
            "host %s: serving %s with the adb server at %s:%d",
            config.host_id,
            config.server,
            config.adb_host,
            config.adb_port,
        )
        try:
            while not self.stopping:
                registered = await registry.refresh()
                if registered is not None and not self.stopping:
                    self._reconcile({device.serial for device in registered}, self.server)
                try:
                    await asyncio.wait_for(self._stopping.wait(), config.scan_seconds)
                except TimeoutError:
                    pass
            await asyncio.gather(*(slot.task for slot in self.slots.values()), return_exceptions=True)
        finally:
            for timer in self._timers:
                timer.cancel()
            for slot in self.slots.values():
                slot.task.cancel()
            await asyncio.gather(*(slot.task for slot in self.slots.values()), return_exceptions=True)
            await self.server.aclose()
            await self.inputs.aclose()
            if history is not None:
                history.close()
            self.pool.shutdown(wait=False, cancel_futures=True)
            log.info("host %s: stopped", config.host_id)

    def _reconcile(self, serials: set[str], server: ControlPlane) -> None:
        """One slot per registered device: new devices get one, departed ones are retired."""
        for serial in sorted(serials):
            slot = self.slots.get(serial)
            if slot is None or slot.done:
                self.slots[serial] = DeviceSlot(serial, self, server.channel())
            elif slot.retired:
                slot.retired = False  # back before its last attempt ended: keep claiming
        for serial, slot in self.slots.items():
            if serial not in serials and not slot.retired:
                log.info("device %s left; claiming no more for it", serial)
                slot.retire()

    # -- helpers for slots and attempts -------------------------------------------------------

    def blocking(self, function: Callable[[], T]) -> asyncio.Future[T]:
        """Run a blocking call (adb) in the pool."""
        return asyncio.get_running_loop().run_in_executor(self.pool, function)

    def attempt_for(self, assignment: ClaimedAttempt, received_at: float, channel: ControlPlane) -> Attempt:
        """The attempt of a claim's answer (which arrived at local monotonic time `received_at`),
        run through `channel`. Its executor writes the attempt's files under
        <--keep-artifacts>/<task>/<attempt>, or in a temporary directory of its own (removed
        when the attempt ends)."""
        assert self.pool is not None, "attempts run only while the host runs"
        keep = self.config.keep_artifacts
        if keep is not None:
            files = Path(keep).resolve() / assignment.task_id / str(assignment.attempt)
        else:
            files = Path(tempfile.mkdtemp(prefix=f"amc-{assignment.task_id}-{assignment.attempt}-"))
        return Attempt(
            assignment=assignment,
            channel=channel,
            clock=ServerClock(assignment.granted_at, received_at),
            executor=AdbExecutor(self.adb, assignment.device, artifacts_dir=files, policy=self.policy),
            pool=self.pool,
            backoff=self.config.report_backoff,
            inputs=self.inputs,
        )
