"""The one codec: kernel records, commands and events to JSON and back.

Stored events and records are tagged with explicit, stable names (never the Python
class name), so renaming a class cannot break a store written before the rename. The
tags below are part of the storage format: add new ones, never change old ones.

The records (a task or a host and everything inside them) are what the store encodes on
every commit and decodes at every start-up, so their hooks in the converter are generated
here, once, from the `attrs` declarations: straight-line code with no per-value dispatch,
about three times as fast as cattrs' generic hooks both ways. They write and accept
exactly cattrs' JSON (the same keys in the same order; `tests/adapters/lmdb/test_codec.py`
proves it against a plain converter by property), so a field added to a record needs no
change here; it needs a new `RECORD_SCHEMA` below, which both stores record and check (with
the step and field list in the LMDB store's `upgrade.py`, which the PostgreSQL store's
`schema.RECORD_UPGRADES` follows).
"""

from __future__ import annotations

import enum
import types
import typing
from collections.abc import Callable
from typing import Any

import attrs
import orjson
from cattrs.errors import ForbiddenExtraKeysError
from cattrs.preconf.orjson import make_converter

from amc.core import commands, events, records
from amc.core.events import Event
from amc.core.records import Host, Plan, Requirements, Task

# The version of the records' JSON, which every store records beside them.
# 3: attempts' steps (release); 4: tasks' artifacts; 5: step outcomes' artifacts; 6: sessions;
# 7: plans' record
RECORD_SCHEMA = 7

converter = make_converter(forbid_extra_keys=True)

EVENT_TAGS: dict[str, type] = {
    "task_submitted": events.TaskSubmitted,
    "host_registered": events.HostRegistered,
    "task_assigned": events.TaskAssigned,
    "attempt_started": events.AttemptStarted,
    "lease_renewed": events.LeaseRenewed,
    "lease_extended": events.LeaseExtended,
    "cancellation_requested": events.CancellationRequested,
    "cancellation_delivered": events.CancellationDelivered,
    "lease_expired": events.LeaseExpired,
    "task_requeued": events.TaskRequeued,
    "task_ended": events.TaskEnded,
    "message_posted": events.MessagePosted,
    "messages_delivered": events.MessagesDelivered,
    "message_acknowledged": events.MessageAcknowledged,
    "message_applied": events.MessageApplied,
    "messages_not_admitted": events.MessagesNotAdmitted,
    "follow_ups_collected": events.FollowUpsCollected,
    "attempt_released": events.AttemptReleased,
    "artifact_stored": events.ArtifactStored,
    "artifacts_purged": events.ArtifactsPurged,
    "action_posted": events.ActionPosted,
    "action_delivered": events.ActionDelivered,
    "action_ended": events.ActionEnded,
    "session_end_requested": events.SessionEndRequested,
}

COMMAND_TAGS: dict[str, type] = dict(commands.NAMES)  # declared with the commands: metrics use them too

RECORD_TAGS: dict[str, type] = {"task": records.Task, "host": records.Host}

_TAG_OF: dict[type, str] = {cls: tag for table in (EVENT_TAGS, COMMAND_TAGS, RECORD_TAGS) for tag, cls in table.items()}
_CLASS_OF: dict[str, type] = {
    tag: cls for table in (EVENT_TAGS, COMMAND_TAGS, RECORD_TAGS) for tag, cls in table.items()
}


def to_data(value: Any) -> dict[str, Any]:
    """A tagged, JSON-ready dict: ``{"type": tag, ...fields}``."""
    data: dict[str, Any] = converter.unstructure(value)
    data["type"] = _TAG_OF[type(value)]
    return data


def from_data(data: dict[str, Any]) -> Any:
    """The inverse of `to_data`."""
    fields = dict(data)
    cls = _CLASS_OF[fields.pop("type")]
    return converter.structure(fields, cls)


def dumps(value: Any) -> bytes:
    return orjson.dumps(to_data(value))


def loads(raw: bytes) -> Any:
    return from_data(orjson.loads(raw))


# --- the records' hooks, generated from their declarations --------------------------------
#
# Each field's type picks one of a few shapes; anything else is refused when this module is
# imported, so a record cannot grow a field that would silently go through a generic path.
#   an attrs class          its own generated hook
#   X | None                None stays None, anything else goes through X's shape
#   tuple[X, ...]           a JSON array (a tuple again when structured)
#   an enum                 its value (structured by calling the enum)
#   anything else           as it is: str, int, bool, None, literals, dicts of JSON (`records.JSON`)

_PLAIN = (str, int, bool, float, type(None), typing.Any, dict)
Shape = tuple[Any, ...]  # how a field's value is converted: ("plain",), ("record", cls), ("optional", shape), ...


def _shape(tp: Any) -> Shape:
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if attrs.has(tp):
        return ("record", tp)
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        return ("enum", tp)
    if origin in (typing.Union, types.UnionType) and type(None) in args and len(args) == 2:
        inner = _shape(next(a for a in args if a is not type(None)))
        return ("plain",) if inner == ("plain",) else ("optional", inner)
    if origin is tuple and len(args) == 2 and args[1] is Ellipsis:
        return ("tuple", _shape(args[0]))
    if tp in _PLAIN or origin is typing.Literal or (origin is dict and all(_shape(a) == ("plain",) for a in args)):
        return ("plain",)
    raise TypeError(f"no generated hook for a field of type {tp!r}: give it one in amc.adapters.codec")


def _unstructure_expr(shape: Shape, value: str, names: dict[str, Any], depth: int = 0) -> str:
    kind = shape[0]
    if kind == "plain":
        return value
    if kind == "enum":  # a StrEnum member is already its wire string: orjson writes it as one
        return value if issubclass(shape[1], str) else f"{value}.value"
    if kind == "record":
        names[f"u_{shape[1].__name__}"] = _unstructure_fns[shape[1]]
        return f"u_{shape[1].__name__}({value})"
    if kind == "optional":
        return f"None if {value} is None else {_unstructure_expr(shape[1], value, names, depth)}"
    item = f"e{depth}"
    inner = _unstructure_expr(shape[1], item, names, depth + 1)
    return f"list({value})" if inner == item else f"[{inner} for {item} in {value}]"


def _structure_expr(shape: Shape, value: str, names: dict[str, Any], depth: int = 0) -> str:
    kind = shape[0]
    if kind == "plain":
        return value
    if kind == "record":
        names[f"s_{shape[1].__name__}"] = _structure_fns[shape[1]]
        return f"s_{shape[1].__name__}({value})"
    if kind == "enum":
        # A lookup in the members by value costs a thirtieth of calling the enum; an unknown
        # value raises KeyError, which the store reports as a record it cannot decode.
        names[f"m_{shape[1].__name__}"] = {member.value: member for member in shape[1]}
        return f"m_{shape[1].__name__}[{value}]"
    if kind == "optional":
        return f"None if {value} is None else {_structure_expr(shape[1], value, names, depth)}"
    item = f"e{depth}"
    inner = _structure_expr(shape[1], item, names, depth + 1)
    if inner == item:
        return f"tuple({value})"
    # Most arrays of a queued task are empty: no attempts, messages or follow-ups yet.
    return f"(() if {value} == [] else tuple([{inner} for {item} in {value}]))"


def _compile(source: str, names: dict[str, Any], name: str) -> Callable[..., Any]:
    exec(compile(source, f"<amc codec: {name}>", "exec"), names)  # noqa: S102 (generated from attrs.fields)
    function: Callable[..., Any] = names[name]
    return function


def stored_fields() -> dict[str, tuple[str, ...]]:
    """The fields of every record class the store keeps (the tagged records and the records
    inside them), by class name, in field order."""
    found: dict[str, tuple[str, ...]] = {}
    todo = list(RECORD_TAGS.values())
    while todo:
        cls = todo.pop()
        if cls.__name__ not in found:
            fields = attrs.fields(attrs.resolve_types(cls))
            found[cls.__name__] = tuple(f.name for f in fields)
            todo.extend(_records_in(_shape(f.type) for f in fields))
    return found


def _records_in(shapes: Any) -> list[type]:
    """The record classes that fields of these shapes hold."""
    found = []
    for shape in shapes:
        while shape[0] in ("optional", "tuple"):
            shape = shape[1]
        if shape[0] == "record":
            found.append(shape[1])
    return found


_unstructure_fns: dict[type, Callable[[Any], dict[str, Any]]] = {}
_structure_fns: dict[type, Callable[[dict[str, Any]], Any]] = {}


def _generate(cls: type) -> None:
    """Generate, and register with the converter, the hooks of `cls` and of the records in it."""
    if cls in _unstructure_fns:
        return
    fields = attrs.fields(attrs.resolve_types(cls))
    shapes = {f.name: _shape(f.type) for f in fields}
    for nested in _records_in(shapes.values()):
        _generate(nested)  # first: the generated code calls their hooks
    names: dict[str, Any] = {}
    items = ", ".join(f"{f.name!r}: {_unstructure_expr(shapes[f.name], f'v.{f.name}', names)}" for f in fields)
    unstructure = _compile(f"def unstructure(v):\n    return {{{items}}}\n", names, "unstructure")
    structure = make_structure(cls)
    _unstructure_fns[cls], _structure_fns[cls] = unstructure, structure
    converter.register_unstructure_hook(cls, unstructure)
    converter.register_structure_hook(cls, structure)


def make_structure(cls: type, **hooks: Callable[[Any], Any]) -> Callable[..., Any]:
    """The structure function of the record class `cls`, with `hooks` (field name ->
    function of the field's JSON) in place of the generated code for those fields."""
    fields = attrs.fields(attrs.resolve_types(cls))
    names: dict[str, Any] = {"build": records.constructor(cls), "complete": _completer(cls)}
    values = []
    for f in fields:
        if f.name in hooks:
            names[f"hook_{f.name}"] = hooks[f.name]
            values.append(f"{f.name}=hook_{f.name}({f.name})")
        else:
            values.append(f"{f.name}={_structure_expr(_shape(f.type), f.name, names)}")
    loads = "".join(f"    {f.name} = d[{f.name!r}]\n" for f in fields)
    source = (
        f"def structure(d, _=None):\n    if len(d) != {len(fields)}:\n        d = complete(d)\n{loads}"
        f"    return build({', '.join(values)})\n"
    )
    return _compile(source, names, "structure")


def _completer(cls: type) -> Callable[[dict[str, Any]], dict[str, Any]]:
    """For a dict that does not hold exactly the fields: refuse unknown keys, and fill the
    defaults of missing fields (a record written before a defaulted field was added), as
    cattrs does. A missing field without a default raises KeyError when it is read."""
    fields = attrs.fields(cls)
    known = {f.name for f in fields}

    def complete(d: dict[str, Any]) -> dict[str, Any]:
        unknown = set(d) - known
        if unknown:
            raise ForbiddenExtraKeysError(None, cls, unknown)
        filled = dict(d)
        for f in fields:
            if f.name not in filled and f.default is not attrs.NOTHING:
                default = f.default
                filled[f.name] = default.factory() if isinstance(default, attrs.Factory) else default  # type: ignore[arg-type]
        return filled

    return complete


for _cls in RECORD_TAGS.values():
    _generate(_cls)


# --- values ------------------------------------------------------------------------------

_TAGS = {cls: tag for table in (EVENT_TAGS, RECORD_TAGS) for tag, cls in table.items()}


def _encoder(cls: type) -> Callable[[Any], bytes]:
    tag, unstructure = _TAGS[cls], converter.get_unstructure_hook(cls)

    def encode(value: Any) -> bytes:
        data = unstructure(value)
        data["type"] = tag
        return orjson.dumps(data)

    return encode


# The commit path encodes every changed record and every event: one encoder per class,
# with the converter's hook looked up once instead of on every call.
_ENCODERS: dict[type, Callable[[Any], bytes]] = {cls: _encoder(cls) for cls in _TAGS}


def encode(value: Any) -> bytes:
    """A record or an event as tagged JSON: exactly `dumps(value)`."""
    return _ENCODERS[type(value)](value)


encode_task: Callable[[Task], bytes] = _ENCODERS[Task]
encode_host: Callable[[Host], bytes] = _ENCODERS[Host]


def _decoder(tag: str, cls: type) -> Callable[[bytes], Any]:
    structure = converter.get_structure_hook(cls)

    def decode(raw: bytes) -> Any:
        data = orjson.loads(raw)
        found = data.pop("type", None)
        if found != tag:
            raise ValueError(f"expected a {tag!r} record, found {found!r}")
        return structure(data, cls)

    return decode


decode_task: Callable[[bytes], Task] = _decoder("task", Task)
decode_host: Callable[[bytes], Host] = _decoder("host", Host)


class TaskLoader:
    """Decodes the task records at start-up, structuring each distinct plan (and each
    distinct set of requirements) once: `decode_task`, with those two fields shared.

    A backlog is mostly many tasks of a few plans, and structuring a plan is the larger
    part of decoding a task; records are immutable, so tasks decoded from the same plan
    JSON can share one `Plan` (about a quarter less CPU at start-up, bench/RESULTS-records.md).
    Keep a loader for one load: its caches grow with the distinct plans it saw.
    """

    def __init__(self) -> None:
        structure = converter.get_structure_hook
        self._structure = make_structure(
            Task, plan=_shared(structure(Plan)), requirements=_shared(structure(Requirements))
        )

    def __call__(self, raw: bytes) -> Task:
        data = orjson.loads(raw)
        found = data.pop("type", None)
        if found != "task":
            raise ValueError(f"expected a 'task' record, found {found!r}")
        task: Task = self._structure(data)
        return task


def _shared(structure: Callable[..., Any]) -> Callable[[Any], Any]:
    """`structure`, answering equal JSON with the same record."""
    cache: dict[bytes, Any] = {}
    seen = 0

    def structure_shared(data: Any) -> Any:
        nonlocal seen
        if seen < 0:  # sharing did not pay: every record structures its own
            return structure(data)
        key = orjson.dumps(data)  # the same stored JSON gives the same record
        found = cache.get(key)
        if found is None:
            found = cache[key] = structure(data)
        seen += 1
        # After a few thousand records, stop keying if almost all were distinct
        # (every task its own plan): the key costs more than it saves.
        if seen == 4096 and len(cache) > 4096 - 512:
            cache.clear()
            seen = -1
        return found

    return structure_shared


def decode_event(raw: bytes) -> Event:
    event: Event = loads(raw)
    if type(event) not in EVENT_TAGS.values():
        raise ValueError(f"the log holds a {type(event).__name__}, not an event")
    return event
