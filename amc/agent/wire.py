"""The JSON the agent reads (assignments, lease grants and the messages they carry) and the
JSON it writes (acknowledgements, the result and the release).

The plan in an assignment was validated by the server when it was submitted, so it is
read leniently here: a step with an action this agent does not know still becomes a step,
and fails when it runs (a truthful `failed` outcome) instead of sinking the whole attempt.

The result (or release) body is built once, as bytes, and those exact bytes are what every retry
sends: specs/protocol.md answers an identical repeat with the recorded outcome and a different
one with 409 `result_conflict`. It is also fitted to the server's limits (1 MiB body,
64 Ki characters per output, 1 Ki per reason): outputs keep their tail, where errors usually
are; an output longer than `INLINE_OUTPUT_CHARS` is also stored whole, as an artifact.
"""

from __future__ import annotations

from typing import Any

import attrs
import orjson

from amc.core.execution import Acknowledgement, FinalReport, Release, RunProgress
from amc.core.lifecycle import MessageState
from amc.core.records import Message, Plan, Stage, Step, StepOutcome
from amc.core.times import from_rfc3339, seconds_to_ms, to_rfc3339

MAX_BODY_BYTES = 960 * 1024  # under the server's 1 MiB, with room for the envelope
MAX_REASON = 1024
# A step's output is reported inline up to this many characters (its tail); a longer one is
# also stored whole as an artifact (`evidence`).
INLINE_OUTPUT_CHARS = 16_384
OUTPUT_BUDGETS = (INLINE_OUTPUT_CHARS, 1024, 0)  # characters kept per output, tried in order until it fits
TRUNCATED = "[...truncated...]\n"


@attrs.frozen(kw_only=True)
class ClaimedAttempt:
    """A claim's answer: one attempt of one task on one of this host's devices."""

    task_id: str
    attempt: int
    lease_id: str
    lease_expires_at: int  # server ms
    lease_ms: int
    device: str
    plan: Plan
    cancel_requested: bool
    session: bool = False  # Part D: a session (its plan is empty; its actions arrive by poll)

    @property
    def granted_at(self) -> int:
        """The server's time when it made the assignment."""
        return self.lease_expires_at - self.lease_ms


@attrs.frozen(kw_only=True)
class Grant:
    """A start or renewal answer."""

    lease_expires_at: int
    cancel_requested: bool
    messages: tuple[Message, ...] = ()  # every message the server has not seen acknowledged


def parse_assignment(data: dict[str, Any]) -> ClaimedAttempt:
    """Raises ValueError (or KeyError/TypeError) when the answer is not an assignment."""
    return ClaimedAttempt(
        task_id=str(data["task_id"]),
        attempt=int(data["attempt"]),
        lease_id=str(data["lease_id"]),
        lease_expires_at=from_rfc3339(data["lease_expires_at"]),
        lease_ms=seconds_to_ms(float(data["lease_seconds"])),
        device=str(data["device"]),
        plan=Plan(steps=()) if data.get("session") is not None else parse_plan(data["plan"]),
        cancel_requested=bool(data.get("cancel_requested", False)),
        session=data.get("session") is not None,
    )


def parse_grant(data: dict[str, Any]) -> Grant:
    return Grant(
        lease_expires_at=from_rfc3339(data["lease_expires_at"]),
        cancel_requested=bool(data.get("cancel_requested", False)),
        messages=tuple(parse_message(m) for m in data.get("messages") or ()),
    )


# The message fields `parse_message` leaves at their defaults, and why; every other field is
# read (`tests/agent/test_wire_fields.py` fails, naming the field, when `Message` gains one).
MESSAGE_FIELDS_NOT_READ: dict[str, str] = {
    "delivered_at": "the server's bookkeeping: the Execution acts on the intent and content",
    "admitted_at": "the server's bookkeeping",
    "completed_at": "the server's bookkeeping",
    "boundary": "set by this host's own acknowledgement, not read back",
    "detail": "set by this host's own acknowledgement, not read back",
    "successor": "the server's bookkeeping of follow-ups",
}


def parse_message(data: dict[str, Any]) -> Message:
    """A carried message: what the Execution needs (id, intent, text, data) and its state."""
    payload = data.get("data")
    if payload is not None and not isinstance(payload, dict):
        raise ValueError(f"message {data.get('id')!r}: data is not an object")
    return Message(
        id=str(data["id"]),
        intent=str(data["intent"]),
        text=data.get("text"),
        data=payload,
        state=MessageState(data.get("state", MessageState.delivered)),
        created_at=from_rfc3339(data["created_at"]),
        attempt=data.get("attempt"),
    )


def lease_body(lease_id: str, progress: RunProgress | None = None) -> bytes:
    """A start or renewal: the lease, and how far the run got (the running step, the steps ended)."""
    body: dict[str, Any] = {"lease_id": lease_id}
    if progress is not None:
        body["progress"] = {"step": progress.step, "ended": progress.ended}
    return orjson.dumps(body)


def acknowledgement_body(lease_id: str, ack: Acknowledgement) -> bytes:
    """POST .../messages/{message_id}: the same bytes on every retry."""
    body: dict[str, Any] = {"lease_id": lease_id, "state": ack.state}
    if ack.boundary is not None:
        body["boundary"] = {"before_step": ack.boundary.before_step}
    if ack.detail is not None:
        body["detail"] = ack.detail if len(ack.detail) <= MAX_REASON else ack.detail[: MAX_REASON - 3] + "..."
    return orjson.dumps(body)


def parse_plan(data: dict[str, Any]) -> Plan:
    record = data.get("record") is True  # issue 26: record every step
    if data.get("stages") is not None:
        stages = tuple(Stage(id=str(stage["id"]), steps=_steps(stage["steps"])) for stage in data["stages"])
        return Plan(stages=stages, record=record)
    return Plan(steps=_steps(data["steps"]), record=record)


def _steps(raw: list[dict[str, Any]]) -> tuple[Step, ...]:
    if not isinstance(raw, list) or not raw:
        raise ValueError("a plan needs a non-empty list of steps")
    return tuple(
        Step(id=str(step["id"]), action=str(step["action"]), args=dict(step.get("args") or {})) for step in raw
    )


# -- the result --------------------------------------------------------------------------


def result_body(lease_id: str, report: FinalReport) -> bytes:
    """The terminal report's body, as the exact bytes to send (and resend)."""
    for budget in OUTPUT_BUDGETS:
        body = orjson.dumps(
            {
                "lease_id": lease_id,
                "status": report.status,
                "metadata": report.metadata,
                "steps": [step_view(step, budget) for step in report.steps],
            }
        )
        if len(body) <= MAX_BODY_BYTES:
            return body
    return body  # a thousand steps with long reasons: let the server say 413 (definite)


def release_body(lease_id: str, release: Release) -> bytes:
    """The release's body (POST .../release), as the exact bytes to send (and resend)."""
    for budget in OUTPUT_BUDGETS:
        body = orjson.dumps(
            {"lease_id": lease_id, "reason": release.reason, "steps": [step_view(s, budget) for s in release.steps]}
        )
        if len(body) <= MAX_BODY_BYTES:
            return body
    return body


def step_view(step: StepOutcome, output_budget: int = OUTPUT_BUDGETS[0]) -> dict[str, Any]:
    """A step outcome on the wire: optional members only when known."""
    view: dict[str, Any] = {"id": step.id, "status": step.status}
    if step.reason is not None:
        view["reason"] = step.reason if len(step.reason) <= MAX_REASON else step.reason[: MAX_REASON - 3] + "..."
    if step.started_at is not None:
        view["started_at"] = to_rfc3339(step.started_at)
    if step.ended_at is not None:
        view["ended_at"] = to_rfc3339(step.ended_at)
    if step.output:
        output = step.output
        if len(output) > output_budget:
            output = TRUNCATED + output[len(output) - output_budget :] if output_budget else TRUNCATED.strip()
        view["output"] = output
    if step.artifacts:
        view["artifacts"] = list(step.artifacts)
    return view
