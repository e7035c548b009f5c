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

Stopping (SIGTERM in `amc host run`): `stop()` calls off every pending claim, puts the
stop reason `host_stopping` on every running attempt (each stops at its next step
boundary, a running step is interrupted as its Execution decides, and each reports), and
`run()` returns when every attempt has had its report answered. `stop(force=True)` (a
second signal) abandons whatever is still running, including report retries.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from amc.adapters.adb.client import BoundedClient
from amc.adapters.adb.executor import AdbExecutor
from amc.adapters.adb.policy import ActionPolicy
from amc.core.execution import StopReason

from .client import ControlPlane
from .config import AgentConfig
from .registry import Registry
from .slot import DeviceSlot
from .wire import ClaimedAttempt
from .worker import AttemptRecord

log = logging.getLogger("amc.agent")
T = TypeVar("T")


class HostAgent:
    """Runs one host's devices for the control plane.

    Args:
        config: server, identity, adb address and pacing.
        policy: the host's action policy; None allows every action.
        adb: an adb server connection to use instead of one made from the config.
    """

    STOP = (StopReason.host_stopping, "the host agent is shutting down")

    def __init__(self, config: AgentConfig, *, policy: ActionPolicy | None = None, adb: BoundedClient | None = None):
        self.config = config
        self.policy = policy
        self.adb = adb or BoundedClient(config.adb_host, config.adb_port)
        self.records: list[AttemptRecord] = []  # every finished attempt, in the order they ended
        self.slots: dict[str, DeviceSlot] = {}
        self.server: ControlPlane | None = None
        self.pool: concurrent.futures.ThreadPoolExecutor | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stopping = asyncio.Event()  # binds to the loop that first waits on it
        self._forced = False

    # -- control ------------------------------------------------------------------------------

    @property
    def stopping(self) -> bool:
        return self._stopping.is_set()

    def stop(self, force: bool = False) -> None:
        """Stop gracefully (or, with force, now); call on the agent's event loop."""
        if not self._stopping.is_set():
            log.info("stopping: no more claims; running attempts stop at their next step boundary")
            self._stopping.set()
            for slot in self.slots.values():
                slot.retire()
                if slot.attempt is not None:
                    slot.attempt.stop(*self.STOP)
        if force and not self._forced:
            log.warning("stopping now: abandoning running attempts and report retries")
            self._forced = True
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
        self.server = ControlPlane(config.server, config.token, config.host_id, timeout=config.request_timeout)
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
                    self._reconcile({device.serial for device in registered})
                try:
                    await asyncio.wait_for(self._stopping.wait(), config.scan_seconds)
                except TimeoutError:
                    pass
            await asyncio.gather(*(slot.task for slot in self.slots.values()), return_exceptions=True)
        finally:
            for slot in self.slots.values():
                slot.task.cancel()
            await asyncio.gather(*(slot.task for slot in self.slots.values()), return_exceptions=True)
            await self.server.aclose()
            self.pool.shutdown(wait=False, cancel_futures=True)
            log.info("host %s: stopped", config.host_id)

    def _reconcile(self, serials: set[str]) -> None:
        """One slot per registered device: new devices get one, departed ones are retired."""
        for serial in sorted(serials):
            slot = self.slots.get(serial)
            if slot is None or slot.done:
                self.slots[serial] = DeviceSlot(serial, self)
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

    def executor_for(self, assignment: ClaimedAttempt) -> AdbExecutor:
        """An executor for one attempt, writing its artifacts under artifacts/<task>/<attempt>."""
        artifacts = Path(self.config.artifacts_dir).resolve() / assignment.task_id / str(assignment.attempt)
        return AdbExecutor(self.adb, assignment.device, artifacts_dir=artifacts, policy=self.policy)
