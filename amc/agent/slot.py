"""One device's loop: claim work for it, run the attempt, claim again.

Each registered device has its own slot, so a host runs one attempt per device and many
devices in parallel, and an idle device waits in a long poll of its own (`devices:
[serial]`). A slot is retired when its device leaves the inventory or the host stops:
its pending claim is called off at once, while an attempt already under way runs to its
report. A slot whose device went away mid-task retires itself after releasing the attempt.
The server checks that a long-polling caller is still there before it assigns, so a
called-off claim takes nothing; only an assignment already on its way back in that instant
is lost, and then its lease lapses and the task is requeued.

A slot knows its host agent only as `Host`, the little it asks of it (the settings, whether
it is stopping, an `Attempt` for each claim's answer), so this module does not import
`host`, which imports it.
"""

from __future__ import annotations

import asyncio
import collections
import logging
import time
from typing import Any, Protocol

from amc.core.execution import StopReason

from .attempt import Attempt
from .client import ControlPlane, Rejected, Uncertain
from .config import AgentConfig
from .session import SessionRun
from .wire import ClaimedAttempt, parse_assignment
from .worker import AttemptRecord, AttemptRun

log = logging.getLogger("amc.agent.slot")

RETRY_SECONDS = 1.0  # after a claim that got no answer or was refused
MIN_CLAIM_SECONDS = 0.5  # a claim loop never spins faster than this (a draining server answers 204 at once)


class Host(Protocol):
    """What a slot asks of the host agent that runs it (`host.HostAgent`)."""

    @property
    def config(self) -> AgentConfig: ...

    @property
    def records(self) -> collections.deque[AttemptRecord]:
        """The latest finished attempts, in the order they ended."""

    @property
    def stopping(self) -> bool: ...

    def stop_reason(self) -> tuple[StopReason, str]:
        """The stop for an attempt of this host while it is stopping."""

    def attempt_for(self, assignment: ClaimedAttempt, received_at: float, channel: ControlPlane) -> Attempt:
        """The attempt of a claim's answer, which arrived at local monotonic time `received_at`."""


class DeviceSlot:
    """Claims and runs attempts for one device, one at a time, until retired.

    Args:
        serial: the device.
        host: the host agent, while it runs.
        channel: this device's own client of the control plane, closed when the slot ends.
    """

    def __init__(self, serial: str, host: Host, channel: ControlPlane):
        self.serial = serial
        self.host = host
        self.retired = False
        self.attempt: Attempt | None = None  # the attempt under way
        self._claim: asyncio.Task[dict[str, Any] | None] | None = None
        self.channel = channel
        self.task = asyncio.create_task(self.run(), name=f"slot {serial}")

    def retire(self) -> None:
        """Claim no more for this device; an attempt under way still finishes."""
        self.retired = True
        if self._claim is not None:
            self._claim.cancel()

    @property
    def done(self) -> bool:
        return self.task.done()

    async def run(self) -> None:
        try:
            await self._claim_and_run()
        finally:
            await self.channel.aclose()

    async def _claim_and_run(self) -> None:
        config, channel = self.host.config, self.channel
        failing = False
        while not self.retired:
            began = time.monotonic()
            self._claim = asyncio.create_task(
                channel.claim(self.serial, config.claim_wait_seconds, config.lease_seconds)
            )
            try:
                data = await self._claim
            except asyncio.CancelledError:
                if (current := asyncio.current_task()) is not None and current.cancelling():
                    raise  # this slot itself is being cancelled (a forced shutdown)
                continue  # the claim was called off by retire(); the loop condition decides
            except (Uncertain, Rejected) as error:
                # Logged when the trouble starts; while the server stays away, quietly. With
                # several servers a lost leader is the likeliest cause: the client logs that
                # once for the host ("no server answers as the leader", then "leader changed
                # from A to B"), and the health of each server says at once who leads now,
                # where a claim sent to the new leader would only say so when its wait ends.
                following = len(channel.endpoints.urls) > 1
                log.log(
                    logging.DEBUG if failing or following else logging.WARNING,
                    "%s: claim failed (%s); retrying every %g s",
                    self.serial,
                    error,
                    RETRY_SECONDS,
                )
                failing = True
                await asyncio.sleep(RETRY_SECONDS)
                if following:
                    await channel.find_leader()
                continue
            finally:
                self._claim = None
            if failing:
                log.log(
                    logging.DEBUG if len(channel.endpoints.urls) > 1 else logging.INFO,
                    "%s: claims answered again",
                    self.serial,
                )
                failing = False
            received = time.monotonic()
            if data is None:  # 204: nothing to do for now
                await asyncio.sleep(max(0.0, MIN_CLAIM_SECONDS - (received - began)))
                continue
            try:
                assignment = parse_assignment(data)
            except (ValueError, KeyError, TypeError) as error:
                # Nothing can be run or reported for it; its lease lapses and the task is requeued.
                log.error("%s: cannot read an assignment (%s): %r", self.serial, error, data)
                continue
            try:
                await self._run(assignment, received)
            except Exception:  # a bug of ours: the device must not stop claiming because of it
                log.exception(
                    "%s: attempt %s/%s failed unexpectedly", self.serial, assignment.task_id, assignment.attempt
                )
        log.debug("%s: slot retired", self.serial)

    async def _run(self, assignment: ClaimedAttempt, received: float) -> None:
        host = self.host
        attempt = host.attempt_for(assignment, received, self.channel)
        run = (SessionRun if assignment.session else AttemptRun)(
            attempt, keep_artifacts=host.config.keep_artifacts is not None
        )
        self.attempt = attempt
        if host.stopping:  # the claim was answered just as the host began to stop: give it back
            attempt.stop(*host.stop_reason())
        try:
            host.records.append(await run.run())
        finally:
            self.attempt = None
        if attempt.execution.stop is StopReason.device_lost:
            # Claiming again for it would only take the released task back onto a device that
            # is gone. The next scan that sees the device gives it a new slot.
            log.warning(
                "%s: the device went away mid-task; claiming no more for it until it is seen again", self.serial
            )
            self.retired = True
