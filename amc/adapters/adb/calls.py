"""One action's dealings with its device: the calls every handler makes, under one `Stopper`.

A `Call` is made per action by the executor. It holds the action's stopper (wall-clock
deadline and interrupt, see `guard`), the device commands sent so far (they become the
result's or the error's `commands`), the attempt's `Memory`, and the places results go.
Handlers (one module per family: `shell`, `gestures`, `keyboard`, `waits`, `apps`,
`observe`) take a Call and the action's arguments and return an `ActionResult` or raise.

Three kinds of device call:
- `fixed`: a short command whose failure shows in its output (`input`, `am`, `pm`...);
- `supervised`: a command wrapped with an exit marker and a kill tag (see `commands`), for
  commands that may run long or whose exit status matters;
- `service`: a binary device service (`exec:screencap`), read whole or not at all.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

import attrs

from amc.core.inputs import referenced_sha256
from amc.core.ui.tree import Screen

from . import commands as build
from ._ppadb import Device
from .client import run_service, run_stream
from .errors import AdbError, DeviceUnavailable, Interrupted, StepFailed, StepTimedOut
from .guard import DEADLINE, Stopper

if TYPE_CHECKING:
    from .recording import Recording

# How the Android tools report failure on stdout, since raw `shell:` has no exit status.
_TOOL_ERROR = re.compile(
    r"^(Error\b.*|.*Exception\b.*|\*\* No activities found.*|.*: not found|"
    r"Usage: .*)$",
    re.MULTILINE,
)


@attrs.frozen(kw_only=True)
class ActionResult:
    """What a completed action produced."""

    action: str
    output: str = ""
    artifact: Path | None = None  # the file produced by `screenshot`, `ui_dump` or `logcat`
    content_type: str | None = None  # the artifact's media type
    more_artifacts: tuple[Path, ...] = ()  # further files of the same type (a recording's later segments)
    exit_status: int | None = None  # for `shell`
    commands: tuple[str, ...] = ()  # the device shell commands sent, in order


@attrs.frozen(kw_only=True)
class Limits:
    """Deadlines of the executor's actions, in seconds (see `AdbExecutor`)."""

    default_shell_timeout: float | None = 300.0
    command_timeout: float = 30.0
    screenshot_timeout: float = 30.0
    cleanup_timeout: float = 5.0


@attrs.define
class Memory:
    """What an attempt's executor remembers between actions.

    `observed`: the screen of the last observation (screenshot or ui_tree), which
    `target.index` refers to. `tree`: the screen of the last `ui_tree`, which `diff` is
    against. `recording`: the screen recording running beside the steps, if any.
    """

    observed: Screen | None = None
    tree: Screen | None = None
    recording: Recording | None = None  # the attempt's screen recording, from `record` start to stop


@attrs.define
class Call:
    """One running action: its device, stopper, deadline and the commands it sent."""

    device: Device
    serial: str
    stopper: Stopper
    limits: Limits
    memory: Memory
    artifacts_dir: Path
    step_id: str | None
    # The local files of the inputs the action's arguments name, by sha256 (the Host Agent
    # fetched them through its input cache before the action ran).
    inputs: Mapping[str, Path] = attrs.field(factory=dict)
    sent: list[str] = attrs.field(factory=list)
    timeout: float | None = None  # the deadline set last, for the reason of a StepTimedOut

    def set_deadline(self, seconds: float | None) -> None:
        """The action stops `seconds` from now (None: no deadline)."""
        self.timeout = seconds
        self.stopper.set_deadline(seconds)

    def result(self, action: str, **fields: Any) -> ActionResult:
        return ActionResult(action=action, commands=tuple(self.sent), **fields)

    def fixed(self, payload: str) -> str:
        """Run a short command whose failure shows in its output; return the output."""
        self.sent.append(payload)
        output = run_stream(self.device, payload, self.stopper)
        if self.stopper.tripped:
            self.stopped(payload.split()[0], bytes(output.data))
        text = decode(bytes(output.data), output.truncated)
        errors = [match.group(0).strip() for match in _TOOL_ERROR.finditer(text)]
        if errors:
            raise StepFailed(f"{payload.split()[0]} reported: {'; '.join(errors)}", output=text)
        return text

    def supervised(self, command: str, what: str) -> tuple[bytes, int, bool]:
        """Run `command` supervised (see `commands`); return (output, exit status, truncated).

        Raises StepTimedOut / Interrupted (after stopping it on the device) when the stopper
        trips, and DeviceUnavailable when the output ends without its exit status.
        """
        token = build.new_token()
        payload = build.supervised(command, token)
        self.sent.append(payload)
        output = run_stream(self.device, payload, self.stopper)
        if self.stopper.tripped:
            partial, _ = build.split_exit_marker(bytes(output.data), token)
            note = self._stop_on_device(token) if output.opened else "it had not started"
            self.stopped(f"{what} ({note})", partial)
        body, status = build.split_exit_marker(bytes(output.data), token)
        if status is None:
            raise DeviceUnavailable(
                "the command's output ended before its exit status: the device "
                "or the adb connection went away mid-command",
                output=body.decode("utf-8", "replace"),
            )
        return body, status, output.truncated

    def service(self, service: str, what: str, *, max_bytes: int) -> bytes:
        """Read a binary device service to its end; fail if it is larger than `max_bytes`."""
        self.sent.append(service)
        output = run_service(self.device, service, self.stopper, max_bytes=max_bytes)
        if self.stopper.tripped:
            self.stopped(what, b"")
        if output.truncated:
            raise StepFailed(f"{what} sent more than {max_bytes} bytes")
        return output.data

    def input_file(self, args: dict[str, Any], name: str) -> Path:
        """The local file of the input argument `name` names."""
        sha256 = referenced_sha256(args.get(name))
        if sha256 is None:
            raise StepFailed(f'argument {name!r} must be an input reference {{"input": "sha256:..."}}')
        path = self.inputs.get(sha256)
        if path is None:
            raise StepFailed(f"input sha256:{sha256} was not fetched to this host before the action ran")
        return path

    def pause(self, seconds: float) -> None:
        """Sleep up to `seconds`; raise as the stopper says if it trips meanwhile."""
        if seconds > 0 and self.stopper.wait(seconds):
            self.stopped("waiting", b"")

    def stopped(self, what: str, partial: bytes) -> NoReturn:
        text = partial.decode("utf-8", "replace")
        if self.stopper.reason == DEADLINE:
            raise StepTimedOut(f"{what} exceeded its {self.timeout} s deadline", output=text)
        raise Interrupted(f"{what} was interrupted", output=text)

    def write_artifact(self, data: bytes, name: str, suffix: str) -> Path:
        """Write `data` to a new file under `artifacts_dir`, never overwriting one."""
        path = self.new_artifact(name, suffix)
        path.write_bytes(data)
        return path

    def new_artifact(self, name: str, suffix: str) -> Path:
        """A new empty file under `artifacts_dir` (never one that exists), to be written."""
        self.artifacts_dir.mkdir(parents=True, exist_ok=True)
        stem = "-".join(_safe(part) for part in (self.serial, name))
        stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime())
        for attempt in range(1000):
            path = self.artifacts_dir / f"{stem}-{stamp}{f'-{attempt}' if attempt else ''}{suffix}"
            try:
                with open(path, "xb"):
                    return path
            except FileExistsError:
                continue
        raise StepFailed(f"cannot find a free artifact name for {stem}")

    def _stop_on_device(self, token: str) -> str:
        """Kill a supervised command after its stream was cut; returns what happened."""
        payload = build.kill_supervised(token)
        self.sent.append(payload)
        stopper = Stopper()  # not the tripped one: this call must still go through
        with stopper.active():
            stopper.set_deadline(self.limits.cleanup_timeout)
            try:
                run_stream(self.device, payload, stopper)
            except AdbError as error:
                return f"could not stop it on the device: {error.reason}"
        if stopper.tripped:
            return "stopping it on the device timed out"
        return "stopped on the device"


def required(args: dict[str, Any], name: str, kind: type | None = None) -> Any:
    if name not in args:
        raise StepFailed(f"missing argument {name!r}")
    value = args[name]
    if kind is not None and not isinstance(value, kind):
        raise StepFailed(f"argument {name!r} must be {kind.__name__}, got {type(value).__name__}")
    return value


def number(
    args: dict[str, Any], name: str, default: float, low: float, high: float, *, open_low: bool = False
) -> float:
    """An optional numeric argument within [low, high] ((low, high] if `open_low`)."""
    value = args.get(name, default)
    ok = not isinstance(value, bool) and isinstance(value, (int, float)) and (value > low if open_low else value >= low)
    if not ok or value > high:
        span = f"({low:g}, {high:g}]" if open_low else f"{low:g}..{high:g}"
        raise StepFailed(f"{name} must be a number in {span}, got {value!r}")
    return float(value)


def flag(args: dict[str, Any], name: str, default: bool) -> bool:
    value = args.get(name, default)
    if not isinstance(value, bool):
        raise StepFailed(f"{name} must be true or false, got {value!r}")
    return value


def as_json(value: dict[str, Any]) -> str:
    """A step's structured output: one compact JSON object."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def decode(data: bytes, truncated: bool) -> str:
    if truncated:
        data = data.lstrip(bytes(range(0x80, 0xC0)))  # the cut may split a UTF-8 character
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise StepFailed(f"the command printed non-UTF-8 output (byte {error.start})") from error


def _safe(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]", "_", text)[:80]
