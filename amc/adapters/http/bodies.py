"""Request bodies: JSON bytes -> typed, validated values, or a 400 whose detail names the field.

Decoding runs in three steps, each refusing with `InvalidRequest`:

1. `orjson` parses the bytes; NaN, Infinity and malformed JSON never get past it.
2. The edge converter (cattrs, `forbid_extra_keys=True`, strict primitive hooks) maps the
   object onto a body class: unknown members, missing members and wrong types are caught
   here, with the path of the offending field (``priority: expected an integer``).
   cattrs' default hooks would coerce ``"5"`` or ``5.7`` or ``true`` to an int; the
   strict hooks refuse anything that is not already of the declared JSON type.
3. The `decode_*` functions check ranges and limits (the ones the protocol states, and the
   edge's own bounds in `Limits`) and return the body.

No rule of the operation is checked here: those belong to the kernel (409s).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any, TypeVar

import attrs
import cattrs
import orjson
from cattrs.cols import is_sequence, list_structure_factory
from cattrs.preconf.orjson import make_converter
from starlette.datastructures import QueryParams

from amc.adapters.http.settings import Limits, Settings
from amc.core import steering
from amc.core.errors import InvalidRequest
from amc.core.lifecycle import TERMINAL_STATUSES, StepStatus, TaskStatus
from amc.core.messages import ACKNOWLEDGEMENTS
from amc.core.plans import check_steps, parse_plan, parse_step
from amc.core.records import Plan, Step, StepOutcome
from amc.core.times import from_rfc3339, seconds_to_ms


class WrongType(ValueError):
    """A JSON value of the wrong type; the message says what was expected."""


def _strict(expected: str, accept: Callable[[Any], bool]) -> Callable[[Any, type], Any]:
    def hook(value: Any, _type: type) -> Any:
        if not accept(value):
            raise WrongType(f"expected {expected}, got {_json_type(value)}")
        return value

    return hook


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__


converter = make_converter(forbid_extra_keys=True)
converter.register_structure_hook(str, _strict("a string", lambda v: isinstance(v, str)))
converter.register_structure_hook(bool, _strict("a boolean", lambda v: isinstance(v, bool)))
converter.register_structure_hook(int, _strict("an integer", lambda v: isinstance(v, int) and not isinstance(v, bool)))
converter.register_structure_hook(
    float, _strict("a number", lambda v: isinstance(v, (int, float)) and not isinstance(v, bool))
)


def _strict_list_factory(type_: Any, conv: cattrs.Converter) -> Callable[[Any, Any], Any]:
    # cattrs would build a list from any iterable: "abc" would become ["a", "b", "c"].
    inner = list_structure_factory(type_, conv)

    def hook(value: Any, type_: Any) -> Any:
        if not isinstance(value, list):
            raise WrongType(f"expected a list, got {_json_type(value)}")
        return inner(value, type_)

    return hook


converter.register_structure_hook_factory(is_sequence, _strict_list_factory)


def _format(exc: BaseException, type_: type | None) -> str:
    """A field's error in the words of the protocol (members, objects, lists)."""
    if isinstance(exc, (WrongType, InvalidRequest)):
        return str(exc)
    if isinstance(exc, KeyError):
        return "required member is missing"
    if isinstance(exc, cattrs.ForbiddenExtraKeysError):
        return f"unknown member(s) {', '.join(sorted(exc.extra_fields))}"
    if type_ is not None and (attrs.has(type_) or getattr(type_, "__origin__", None) is dict):
        return "expected an object"
    return cattrs.v.format_exception(exc, type_)


Body = TypeVar("Body")


def structure(data: Any, cls: type[Body]) -> Body:
    """`data` as an instance of the body class `cls`, or `InvalidRequest` naming each bad field."""
    if not isinstance(data, dict):
        raise InvalidRequest(f"body: expected a JSON object, got {_json_type(data)}")
    try:
        return converter.structure(data, cls)
    except (cattrs.BaseValidationError, WrongType, KeyError, TypeError, ValueError) as error:
        messages = []
        for message in cattrs.transform_error(error, path="$", format_exception=_format):
            text, _, path = message.rpartition(" @ ")
            field = path.removeprefix("$").removeprefix(".") or "body"
            messages.append(f"{field}: {text}")
        raise InvalidRequest("; ".join(messages)) from None


def parse_json(raw: bytes, *, optional: bool = False) -> Any:
    """The JSON value of a request body; an empty body is ``{}`` where a body is optional."""
    if not raw.strip():
        if optional:
            return {}
        raise InvalidRequest("body: a JSON object is required")
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError as error:
        raise InvalidRequest(f"body: not valid JSON ({error})") from None


# ---------------------------------------------------------------------------------------
# Body classes: exactly the members specs/protocol.md lists, with its defaults.


@attrs.frozen(kw_only=True)
class RequirementsBody:
    serial: str | None = None
    attributes: dict[str, str] = attrs.field(factory=dict)


MAX_IDLE_SECONDS = 86_400  # a session's idle timeout, at most a day


@attrs.frozen(kw_only=True)
class SessionBody:
    idle_timeout_seconds: float = 300.0


@attrs.frozen(kw_only=True)
class SubmitBody:
    plan: Any = None
    session: SessionBody | None = None  # Part D: exactly one of plan and session
    requirements: RequirementsBody = attrs.field(factory=RequirementsBody)
    priority: int = 0
    max_attempts: int = 3
    labels: dict[str, str] = attrs.field(factory=dict)
    idempotency_key: str | None = None
    tenant: str | None = None


@attrs.frozen(kw_only=True)
class DeviceBody:
    serial: str
    attributes: dict[str, str] = attrs.field(factory=dict)


@attrs.frozen(kw_only=True)
class InventoryBody:
    devices: list[DeviceBody]


@attrs.frozen(kw_only=True)
class ClaimBody:
    devices: list[str] | None = None
    lease_seconds: float | None = None
    wait_seconds: float = 0.0
    sessions: bool = False  # Part D


@attrs.frozen(kw_only=True)
class ProgressBody:
    step: str | None  # the step running now, or null between steps
    ended: int  # how many steps have ended in this attempt


@attrs.frozen(kw_only=True)
class LeaseBody:
    lease_id: str
    progress: ProgressBody | None = None


@attrs.frozen(kw_only=True)
class StepOutcomeBody:
    id: str
    status: str
    reason: str | None = None
    started_at: str | None = None
    ended_at: str | None = None
    output: str | None = None
    artifacts: list[str] | None = None  # Part C: ids of the step's artifacts


@attrs.frozen(kw_only=True)
class ResultBody:
    lease_id: str
    status: str
    metadata: dict[str, Any] = attrs.field(factory=dict)
    steps: list[StepOutcomeBody] | None = None


@attrs.frozen(kw_only=True)
class ReleaseBody:
    lease_id: str
    reason: str | None = None
    steps: list[StepOutcomeBody] | None = None


@attrs.frozen(kw_only=True)
class CancelBody:
    reason: str | None = None


@attrs.frozen(kw_only=True)
class ClockBody:
    advance_seconds: float


@attrs.frozen(kw_only=True)
class MessageBody:
    intent: str
    text: str | None = None
    data: Any = None  # checked by hand: its shape depends on the intent


@attrs.frozen(kw_only=True)
class BoundaryBody:
    before_step: str | None  # required, and null means after the last step


@attrs.frozen(kw_only=True)
class AcknowledgementBody:
    lease_id: str
    state: str
    boundary: BoundaryBody | None = None
    detail: str | None = None


# ---------------------------------------------------------------------------------------
# Decoders: structure, then check ranges and limits.

IDEMPOTENCY_KEY = re.compile(r"[A-Za-z0-9._~-]{1,128}")
# In declaration order, for the messages that list them.
RESULT_STATUSES = tuple(status for status in TaskStatus if status in TERMINAL_STATUSES)
STEP_STATUSES = tuple(StepStatus)
TASK_STATUSES = tuple(TaskStatus)


def _check_map(field: str, mapping: dict[str, str], limits: Limits) -> None:
    if len(mapping) > limits.max_map_entries:
        raise InvalidRequest(f"{field}: at most {limits.max_map_entries} entries")
    for key, value in mapping.items():
        if not key or len(key) > limits.max_map_string_length or len(value) > limits.max_map_string_length:
            raise InvalidRequest(
                f"{field}: keys must be 1-{limits.max_map_string_length} characters"
                f" and values at most {limits.max_map_string_length} ({key[:40]!r})"
            )


def _check_id(field: str, value: str, limits: Limits) -> None:
    if not value or len(value) > limits.max_id_length:
        raise InvalidRequest(f"{field}: must be 1-{limits.max_id_length} characters")


def decode_submit(raw: bytes, limits: Limits, may_name_tenant: bool) -> tuple[SubmitBody, Plan]:
    """The submission and its plan (empty for a session: `session_idle_ms` says which)."""
    data = parse_json(raw)
    if isinstance(data, dict) and "tenant" in data and not may_name_tenant:
        raise InvalidRequest("tenant: only an admin may name the tenant of a task")
    submit = structure(data, SubmitBody)
    has_plan = isinstance(data, dict) and "plan" in data
    if has_plan == (submit.session is not None):
        raise InvalidRequest("plan: a task has exactly one of plan and session")
    plan = parse_plan(submit.plan) if has_plan else Plan(steps=())
    if not -1000 <= submit.priority <= 1000:
        raise InvalidRequest("priority: must be an integer in -1000..1000")
    if not 1 <= submit.max_attempts <= 100:
        raise InvalidRequest("max_attempts: must be an integer in 1..100")
    _check_map("labels", submit.labels, limits)
    _check_map("requirements.attributes", submit.requirements.attributes, limits)
    if submit.requirements.serial is not None:
        _check_id("requirements.serial", submit.requirements.serial, limits)
    if submit.idempotency_key is not None and not IDEMPOTENCY_KEY.fullmatch(submit.idempotency_key):
        raise InvalidRequest("idempotency_key: must be 1-128 characters of A-Za-z0-9._~-")
    if submit.tenant is not None:
        _check_id("tenant", submit.tenant, limits)
    return submit, plan


def session_idle_ms(submit: SubmitBody) -> int | None:
    """Part D: the idle timeout of a submitted session in ms, or None for a plan."""
    if submit.session is None:
        return None
    seconds = submit.session.idle_timeout_seconds
    if not 0 < seconds <= MAX_IDLE_SECONDS:
        raise InvalidRequest(f"session.idle_timeout_seconds: must lie within (0, {MAX_IDLE_SECONDS}]")
    return max(1, seconds_to_ms(seconds))


@attrs.frozen(kw_only=True)
class PollBody:
    lease_id: str
    wait_seconds: float = 0.0
    running: str | None = None  # the action the host runs now: wait for a cancel instead


@attrs.frozen(kw_only=True)
class ActionReportBody:
    lease_id: str
    status: str
    reason: str | None = None
    started_at: str | None = None
    ended_at: str | None = None
    output: str | None = None
    artifacts: list[str] | None = None


def decode_action(raw: bytes, limits: Limits) -> Step:
    """Part D: an action is a step object, checked as a plan's step is."""
    data = parse_json(raw)
    step = parse_step(data, "action")
    _check_id("id", step.id, limits)
    return step


def decode_wait(params: QueryParams, limits: Limits) -> float:
    """Part D: the `wait_seconds` query parameter (0..30, default 0); no other parameter."""
    extra = sorted(set(params.keys()) - {"wait_seconds"})
    if extra:
        raise InvalidRequest(f"{extra[0]}: unknown query parameter")
    values = params.getlist("wait_seconds")
    if not values:
        return 0.0
    if len(values) > 1:
        raise InvalidRequest("wait_seconds: given twice")
    try:
        wait = float(values[0])
    except ValueError:
        raise InvalidRequest("wait_seconds: must be a number of seconds") from None
    if not 0 <= wait <= limits.max_wait_seconds:  # also refuses nan
        raise InvalidRequest(f"wait_seconds: must lie within 0..{limits.max_wait_seconds:g}")
    return wait


def decode_end(raw: bytes) -> None:
    """An end's body: none, or `{}`."""
    structure(parse_json(raw, optional=True), EndBody)


@attrs.frozen(kw_only=True)
class EndBody:
    pass


def decode_poll(raw: bytes, limits: Limits) -> PollBody:
    body: PollBody = structure(parse_json(raw), PollBody)
    if not 0 <= body.wait_seconds <= limits.max_wait_seconds:
        raise InvalidRequest(f"wait_seconds: must lie within 0..{limits.max_wait_seconds:g}")
    return body


def decode_action_report(raw: bytes, limits: Limits, action_id: str) -> tuple[ActionReportBody, StepOutcome]:
    body: ActionReportBody = structure(parse_json(raw), ActionReportBody)
    as_step = StepOutcomeBody(
        id=action_id,
        status=body.status,
        reason=body.reason,
        started_at=body.started_at,
        ended_at=body.ended_at,
        output=body.output,
        artifacts=body.artifacts,
    )
    outcomes = _step_outcomes([as_step], limits)
    assert outcomes is not None
    return body, outcomes[0]


def decode_inventory(raw: bytes, limits: Limits) -> InventoryBody:
    inventory = structure(parse_json(raw), InventoryBody)
    if len(inventory.devices) > limits.max_devices:
        raise InvalidRequest(f"devices: at most {limits.max_devices} devices")
    seen = set()
    for index, device in enumerate(inventory.devices):
        _check_id(f"devices[{index}].serial", device.serial, limits)
        _check_map(f"devices[{index}].attributes", device.attributes, limits)
        if device.serial in seen:
            raise InvalidRequest(f"devices[{index}].serial: {device.serial!r} is listed twice")
        seen.add(device.serial)
    return inventory


def decode_claim(raw: bytes, settings: Settings) -> tuple[ClaimBody, int]:
    """The claim body and the lease length it asks for, in ms."""
    claim = structure(parse_json(raw, optional=True), ClaimBody)
    limits = settings.limits
    if claim.devices is not None:
        if len(claim.devices) > limits.max_devices:
            raise InvalidRequest(f"devices: at most {limits.max_devices} serials")
        for index, serial in enumerate(claim.devices):
            _check_id(f"devices[{index}]", serial, limits)
    lease_seconds = settings.lease_seconds if claim.lease_seconds is None else claim.lease_seconds
    if not settings.min_lease_seconds <= lease_seconds <= settings.max_lease_seconds:
        raise InvalidRequest(
            f"lease_seconds: must lie within {settings.min_lease_seconds:g}..{settings.max_lease_seconds:g}"
        )
    if not 0 <= claim.wait_seconds <= limits.max_wait_seconds:
        raise InvalidRequest(f"wait_seconds: must lie within 0..{limits.max_wait_seconds:g}")
    return claim, seconds_to_ms(lease_seconds)


def decode_lease(raw: bytes) -> LeaseBody:
    """A start or renewal body; whether its progress names a step of the task is the kernel's
    to say (`StartAttempt.progress_step`)."""
    body: LeaseBody = structure(parse_json(raw), LeaseBody)
    if body.progress is not None and body.progress.ended < 0:
        raise InvalidRequest("progress.ended: must be 0 or more")
    return body


def decode_result(raw: bytes, limits: Limits) -> tuple[ResultBody, tuple[StepOutcome, ...] | None]:
    """The result body and its step outcomes, each well formed; whether they name the
    attempt's planned steps (as steering left them) is the kernel's rule."""
    result = structure(parse_json(raw), ResultBody)
    if result.status not in RESULT_STATUSES:
        raise InvalidRequest(f"status: must be one of {', '.join(RESULT_STATUSES)}")
    if len(orjson.dumps(result.metadata)) > limits.max_metadata_bytes:
        raise InvalidRequest(f"metadata: at most {limits.max_metadata_bytes} bytes as JSON")
    return result, _step_outcomes(result.steps, limits)


def decode_release(raw: bytes, limits: Limits) -> tuple[ReleaseBody, tuple[StepOutcome, ...] | None]:
    """The release body and its step outcomes, each well formed, as a result's."""
    release = structure(parse_json(raw), ReleaseBody)
    if release.reason is not None and len(release.reason) > limits.max_reason_length:
        raise InvalidRequest(f"reason: at most {limits.max_reason_length} characters")
    return release, _step_outcomes(release.steps, limits)


def _step_outcomes(steps: list[StepOutcomeBody] | None, limits: Limits) -> tuple[StepOutcome, ...] | None:
    if steps is None:
        return None
    outcomes = []
    for step in steps:
        where = f"steps[{step.id!r}]"
        if step.status not in STEP_STATUSES:
            raise InvalidRequest(f"{where}.status: must be one of {', '.join(STEP_STATUSES)}")
        if step.reason is not None and len(step.reason) > limits.max_reason_length:
            raise InvalidRequest(f"{where}.reason: at most {limits.max_reason_length} characters")
        if step.output is not None and len(step.output) > limits.max_string_length:
            raise InvalidRequest(f"{where}.output: at most {limits.max_string_length} characters")
        if any(len(artifact_id) > limits.max_id_length for artifact_id in step.artifacts or ()):
            raise InvalidRequest(f"{where}.artifacts: an artifact id has at most {limits.max_id_length} characters")
        outcomes.append(
            StepOutcome(
                id=step.id,
                status=StepStatus(step.status),
                reason=step.reason,
                started_at=_time(f"{where}.started_at", step.started_at),
                ended_at=_time(f"{where}.ended_at", step.ended_at),
                output=step.output,
                artifacts=tuple(step.artifacts or ()),
            )
        )
    return tuple(outcomes)


def _time(field: str, text: str | None) -> int | None:
    if text is None:
        return None
    try:
        return from_rfc3339(text)
    except ValueError:
        raise InvalidRequest(f"{field}: expected an RFC 3339 time such as 2026-11-29T23:00:00.000Z") from None


def decode_cancel(raw: bytes, limits: Limits) -> CancelBody:
    cancel = structure(parse_json(raw, optional=True), CancelBody)
    if cancel.reason is not None and len(cancel.reason) > limits.max_reason_length:
        raise InvalidRequest(f"reason: at most {limits.max_reason_length} characters")
    return cancel


def decode_message(raw: bytes, limits: Limits, message_id: str) -> MessageBody:
    """A message to a task, to be named `message_id`: bounded text and data, and steps in the
    data fit to run. Which intents there are and what each takes, the kernel decides."""
    message = structure(parse_json(raw), MessageBody)
    if message.text is not None and len(message.text) > limits.max_message_text_length:
        raise InvalidRequest(f"text: at most {limits.max_message_text_length} characters")
    if message.data is not None:
        if not isinstance(message.data, dict):
            raise InvalidRequest(f"data: expected an object, got {_json_type(message.data)}")
        if len(orjson.dumps(message.data)) > limits.max_metadata_bytes:
            raise InvalidRequest(f"data: at most {limits.max_metadata_bytes} bytes as JSON")
    _check_intent_data(message, limits, message_id)
    return message


def _check_intent_data(message: MessageBody, limits: Limits, message_id: str) -> None:
    """Steps in a message's data are checked as a submitted plan's steps are, since the host
    will run them. What each intent takes is the kernel's rule (`amc.core.messages`)."""
    data = message.data
    if message.intent == "steer":
        edit = steering.parse_edit(data)
        if isinstance(edit, steering.InsertAfter):
            check_steps(edit.steps, "data.steps")
        elif isinstance(edit, steering.ReplaceRemaining):
            check_steps(edit.steps, "data.replace_remaining")
    elif message.intent == "follow_up" and data and "steps" in data:
        steps = steering.parse_steps(data["steps"], "data.steps")
        check_steps(steps, "data.steps")
        _check_successor_ids(steps, limits, message_id)


def _check_successor_ids(steps: tuple[Step, ...], limits: Limits, message_id: str) -> None:
    """A successor task runs these steps under ``<message id>.<step id>``, which must still
    be a valid step id."""
    room = limits.max_id_length - len(message_id) - 1
    for index, step in enumerate(steps):
        if len(step.id) > room:
            raise InvalidRequest(
                f"data.steps[{index}]: a follow-up's step ids are at most {room} characters"
                f" (this one has {len(step.id)}), since its successor task prefixes them with the message id"
            )


def decode_acknowledgement(raw: bytes, limits: Limits) -> AcknowledgementBody:
    """A host's acknowledgement of a message, bounded, in a state a host may acknowledge
    (checked here, as the kernel does, so the edge hands the kernel a `MessageState`); what
    each state needs (a boundary to admit, a detail to reject) is the kernel's rule."""
    ack = structure(parse_json(raw), AcknowledgementBody)
    if ack.state not in ACKNOWLEDGEMENTS:
        raise InvalidRequest(f"state: must be one of {', '.join(ACKNOWLEDGEMENTS)}")
    if ack.boundary is not None and ack.boundary.before_step is not None:
        _check_id("boundary.before_step", ack.boundary.before_step, limits)
    if ack.detail is not None and len(ack.detail) > limits.max_reason_length:
        raise InvalidRequest(f"detail: at most {limits.max_reason_length} characters")
    return ack


def decode_clock(raw: bytes, limits: Limits) -> int:
    """The advance, in ms (at least 1)."""
    clock = structure(parse_json(raw), ClockBody)
    if not 0 < clock.advance_seconds <= limits.max_clock_advance_seconds or seconds_to_ms(clock.advance_seconds) < 1:
        raise InvalidRequest(
            f"advance_seconds: must be a number of seconds in 0.001..{limits.max_clock_advance_seconds:g}"
        )
    return seconds_to_ms(clock.advance_seconds)


@attrs.frozen
class ListQuery:
    """A task listing's query: which tasks, how many, from where, in which order."""

    status: str | None
    limit: int
    after: str | None
    newest_first: bool
    label: tuple[str, str] | None


LIST_PARAMETERS = ("status", "limit", "after", "order", "label")


def decode_list_query(params: QueryParams, limits: Limits) -> ListQuery:
    """``status``, ``limit``, ``after``, ``order`` and ``label`` of a task listing."""
    unknown = set(params.keys()) - set(LIST_PARAMETERS)
    if unknown:
        raise InvalidRequest(f"query: unknown parameter(s) {', '.join(sorted(unknown))}")
    for name in LIST_PARAMETERS:
        if len(params.getlist(name)) > 1:
            raise InvalidRequest(f"{name}: given more than once")
    status = params.get("status")
    if status is not None and status not in TASK_STATUSES:
        raise InvalidRequest(f"status: must be one of {', '.join(TASK_STATUSES)}")
    text = params.get("limit", "100")
    if not text.isascii() or not text.isdigit() or not 1 <= int(text) <= 1000:
        raise InvalidRequest("limit: must be an integer in 1..1000")
    after = params.get("after")
    if after is not None and (not after or len(after) > 256):
        raise InvalidRequest("after: not a cursor from this server")
    order = params.get("order", "oldest")
    if order not in ("oldest", "newest"):
        raise InvalidRequest("order: must be oldest or newest")
    label = None
    if "label" in params:
        key, equals, value = params["label"].partition("=")
        if (
            not equals
            or not key
            or len(key) > limits.max_map_string_length
            or len(value) > limits.max_map_string_length
        ):
            raise InvalidRequest("label: must be key=value, as the task's labels hold them")
        label = (key, value)
    return ListQuery(status, int(text), after, order == "newest", label)
