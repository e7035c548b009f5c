"""`Attempt`: one attempt as the pieces that run it share it.

The start, the renewer (`renewer`), the acknowledgement sender (`acks`), the evidence
uploads (`evidence`), the step runner (`runner`) and a session's action loop (`session`)
all work on the same attempt: the claim's answer (task id, attempt number, lease id and
length, plan), the device's channel to the control plane and its executor, the server's
clock as estimated for this attempt, the `Execution` that makes every decision, and the
two events that tell a waiting step loop the Execution observed something. Each takes this
one object, built once per claim by the host (`HostAgent.attempt_for`).

It also holds what they all do alike with the server's answers:

- `ask_lease` is the one grant handler: it sends a start or a renewal and hands a grant to
  the clock and the Execution (a `cancel_requested: true` there is a stop request; the
  messages it carries wait in the Execution for the next step boundary). A 409 (or 404)
  is lease loss;
- `lease_refused`: any call refused for the lease (a renewal, an acknowledgement, an
  upload, a session's poll or outcome) ends the lease for good;
- `retry_after`: the pause before a request that got no answer is sent again.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import random
import time
from pathlib import Path
from typing import Literal

import attrs

from amc.adapters.adb.executor import AdbExecutor
from amc.core import inputs
from amc.core.execution import Execution, StopReason
from amc.core.records import Step

from .client import ControlPlane, Rejected, Uncertain
from .clock import ServerClock
from .inputs import InputCache, InputUnavailable
from .wire import ClaimedAttempt, parse_grant

log = logging.getLogger("amc.agent.attempt")

# A refusal that ends the lease for good: every lease check is a 409; 404 is a task or
# attempt the server no longer knows (a store that was reset).
LEASE_REFUSALS = (404, 409)


@attrs.define(kw_only=True, eq=False)
class Attempt:
    """One claimed attempt on one device, and what its runtime pieces share.

    Args:
        assignment: the claim's answer.
        channel: the device's client of the control plane.
        clock: the server's clock, first anchored at the claim's answer.
        executor: the device's executor (its artifacts directory is this attempt's).
        pool: threads for the blocking device calls.
        backoff: first and longest pause between retries of a request that got no answer, in seconds.
        inputs: the host's input cache (None: a step that names an input fails, saying so).
    """

    assignment: ClaimedAttempt
    channel: ControlPlane
    clock: ServerClock
    executor: AdbExecutor
    pool: concurrent.futures.Executor
    backoff: tuple[float, float] = (0.1, 5.0)
    inputs: InputCache | None = None
    execution: Execution = attrs.field(init=False)
    label: str = attrs.field(init=False)  # names the attempt in logs
    # Set once there is a stop to act on:
    stop_signal: asyncio.Event = attrs.field(init=False, factory=asyncio.Event)
    # Set whenever the Execution observed something:
    wake: asyncio.Event = attrs.field(init=False, factory=asyncio.Event)
    _cancel_logged: bool = attrs.field(init=False, default=False)

    @execution.default
    def _execution(self) -> Execution:
        return Execution(self.assignment.plan, self.assignment.lease_expires_at)

    @label.default
    def _label(self) -> str:
        a = self.assignment
        return f"{a.task_id}/{a.attempt}@{a.device}"

    async def local_inputs(self, step: Step) -> dict[str, Path]:
        """The local file of every input `step` names, by sha256, through the input cache;
        raises InputUnavailable (the step then fails before its action runs)."""
        found: dict[str, Path] = {}
        for _, sha256 in inputs.references(step.args):
            if self.inputs is None:
                raise InputUnavailable(f"input sha256:{sha256}: this Host Agent has no input cache")
            if sha256 not in found:
                found[sha256] = await self.inputs.path_for(inputs.PREFIX + sha256)
        return found

    @property
    def lease_lost(self) -> bool:
        """The lease is over for good: nothing is left to renew, acknowledge or upload."""
        return self.execution.stop is StopReason.lease_lost

    def changed(self) -> None:
        """The Execution observed something: wake a paused runner, and interrupt a step if
        there is a stop to act on."""
        self.wake.set()
        if self.execution.stop is not None:
            self.stop_signal.set()

    def stop(self, reason: StopReason, detail: str) -> None:
        """Ask the attempt to stop (e.g. the host is shutting down); the Execution decides
        whether the running step is interrupted or the stop waits for the next boundary."""
        self.execution.request_stop(reason, detail)
        self.changed()

    def lease_refused(self, code: str) -> None:
        """A request was refused for the lease (`code`): the lease is lost, for good."""
        self.execution.lease_refused(code)
        self.changed()

    async def ask_lease(self, kind: Literal["start", "renew"]) -> float | None:
        """Send the start or a renewal and act on its answer: the local monotonic time the
        granted request was sent, or None when it was not granted (refused, or no answer).

        A grant anchors the clock (the server's time is its new expiry less the lease's
        length, paired with the send: see `clock`) and goes to the Execution. The request
        may not outlive the lease: its deadline is the time left before the lease expires,
        as estimated here."""
        a, execution, clock = self.assignment, self.execution, self.clock
        what = "start" if kind == "start" else "renewal"
        sent = time.monotonic()
        try:
            data = await self.channel.lease(
                kind,
                a.task_id,
                a.attempt,
                a.lease_id,
                deadline=clock.seconds_until(execution.lease_expires_at),
                progress=execution.progress,
            )
            grant = parse_grant(data)
        except Rejected as error:
            if error.status in LEASE_REFUSALS:
                # An attempt that ended (a session the server ended, or a result that crossed
                # this request) is over, not lost: worth a warning only when it was taken away.
                level = logging.INFO if error.code == "lease_ended" else logging.WARNING
                log.log(level, "%s: %s refused (%s): the lease is over", self.label, what, error)
                self.lease_refused(error.code)
            else:
                log.warning("%s: %s refused (%s); trying again", self.label, what, error)
            return None
        except (Uncertain, ValueError, KeyError, TypeError) as error:
            log.warning("%s: %s got no answer (%s); trying again", self.label, what, error)
            return None
        clock.observe(grant.lease_expires_at - a.lease_ms, sent)
        execution.lease_granted(clock.now(), grant.lease_expires_at, grant.cancel_requested, grant.messages)
        if grant.cancel_requested and not self._cancel_logged:
            self._cancel_logged = True
            log.info("%s: cancellation requested", self.label)
        self.changed()
        return sent

    async def retry_after(self, delay: float) -> float:
        """Wait about `delay` seconds (jittered, so hosts do not retry in step) before a
        request is sent again; the next pause: doubled, up to the longest."""
        await asyncio.sleep(delay * random.uniform(0.8, 1.2))
        return min(delay * 2, self.backoff[1])
