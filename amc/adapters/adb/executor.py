"""Runs plan actions (specs/protocol.md "Plan") on one device through ppadb.

    executor = AdbExecutor(BoundedClient("127.0.0.1", 5037), "emulator-5554",
                           artifacts_dir=Path("artifacts"), policy=ActionPolicy.load("policy.json"))
    result = executor.run("shell", {"command": "getprop ro.product.model", "timeout_seconds": 5})

The observations produce a file each, under `artifacts_dir`: `screenshot` a PNG,
`ui_dump` the `uiautomator dump` XML (checked to parse, with a <hierarchy> root), `logcat`
the device log's last `lines` lines (threadtime format). The result names the file and
its media type.

Outcomes: `run()` returns an `ActionResult`, or raises `ActionRefused` (the policy said no;
nothing was sent), `StepFailed` (and its `DeviceUnavailable` / `StepTimedOut`
subclasses) or `Interrupted` (another thread called `interrupt()`). The caller maps
them to the step statuses `completed`, `refused`, `failed` and `interrupted`.

Every action runs under a `Stopper` (see `guard`): a wall-clock deadline and
`interrupt()` both cut the action's ppadb connections at once. A `shell` action is
supervised (see `commands`): its exit status comes back as a marker, and when it is
stopped early a second call `pkill`s it on the device, since closing a raw shell stream
does not stop a silent process there (specs/adb.md §7). `ui_dump` and `logcat` run
their device commands supervised the same way.
"""

from __future__ import annotations

import re
import threading
import time
import xml.etree.ElementTree as ElementTree
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import attrs

from . import commands as build
from ._ppadb import Device
from .client import MAX_OUTPUT_BYTES, BoundedClient, StreamOutput, call, run_stream
from .errors import AdbError, DeviceUnavailable, Interrupted, StepFailed, StepTimedOut
from .guard import DEADLINE, INTERRUPT, Stopper
from .policy import ActionPolicy

SCREENCAP = "/system/bin/screencap -p"  # what ppadb's screencap() sends
_PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
_PNG_END = b"IEND\xaeB`\x82"
# What `uiautomator dump FILE` prints once FILE is written, misspelt as the tool spells it.
UI_DUMP_CONFIRMATION = "UI hierchary dumped to: "
DEFAULT_LOGCAT_LINES = 200
PNG, XML, TEXT = "image/png", "application/xml", "text/plain; charset=utf-8"
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
    exit_status: int | None = None  # for `shell`
    commands: tuple[str, ...] = ()  # the device shell commands sent, in order


class AdbExecutor:
    """Runs actions on one device, one at a time; `interrupt()` may come from any thread.

    Args:
        client: the adb server connection (a BoundedClient, so calls cannot hang).
        serial: the device.
        artifacts_dir: where screenshots are written (created if missing).
        policy: the host's action policy; None allows everything.
        default_shell_timeout: deadline of a `shell` step without `timeout_seconds`
            (None: no deadline).
        command_timeout: deadline of the fixed actions (tap, swipe, text, keyevent, launch)
            and of the observations `ui_dump` and `logcat`.
        screenshot_timeout: deadline of a screenshot.
        cleanup_timeout: deadline of the `pkill` that stops a cut-short shell step.
    """

    ACTIONS = ("shell", "tap", "swipe", "text", "keyevent", "launch", "screenshot", "wait", "ui_dump", "logcat")

    def __init__(
        self,
        client: BoundedClient,
        serial: str,
        *,
        artifacts_dir: str | Path,
        policy: ActionPolicy | None = None,
        default_shell_timeout: float | None = 300.0,
        command_timeout: float = 30.0,
        screenshot_timeout: float = 30.0,
        cleanup_timeout: float = 5.0,
    ):
        self.serial = serial
        self.artifacts_dir = Path(artifacts_dir)
        self.policy = policy or ActionPolicy()
        self.default_shell_timeout = default_shell_timeout
        self.command_timeout = command_timeout
        self.screenshot_timeout = screenshot_timeout
        self.cleanup_timeout = cleanup_timeout
        self._device = Device(client, serial)
        self._lock = threading.Lock()
        self._current: Stopper | None = None
        self._handlers: dict[str, Callable[[Mapping[str, Any], Stopper, list[str], str | None], ActionResult]] = {
            "shell": self._shell,
            "tap": self._tap,
            "swipe": self._swipe,
            "text": self._text,
            "keyevent": self._keyevent,
            "launch": self._launch,
            "screenshot": self._screenshot,
            "wait": self._wait,
            "ui_dump": self._ui_dump,
            "logcat": self._logcat,
        }

    # --- public API ---------------------------------------------------------------

    def run(self, action: str, args: Mapping[str, Any] | None = None, *, step_id: str | None = None) -> ActionResult:
        """Run one action and return its result; raises ActionRefused, StepFailed or Interrupted.

        `step_id` only names artifacts (e.g. the screenshot file).
        """
        args = dict(args or {})
        handler = self._handlers.get(action)
        if handler is None:
            raise StepFailed(f"unknown action {action!r}")
        self.policy.check(action, args)
        stopper = Stopper()
        with self._lock:
            if self._current is not None:
                raise RuntimeError("an AdbExecutor runs one action at a time")
            self._current = stopper
        sent: list[str] = []
        try:
            with stopper.active():
                return handler(args, stopper, sent, step_id)
        except AdbError as error:
            error.commands = tuple(sent)
            raise
        finally:
            with self._lock:
                self._current = None

    def interrupt(self) -> bool:
        """Stop the running action now (from any thread). True if one was running.

        The action raises `Interrupted`; a supervised shell command is also killed on the
        device. An interrupt when nothing runs does nothing: callers check their own
        cancellation flag before starting the next step.
        """
        with self._lock:
            stopper = self._current
        if stopper is None:
            return False
        stopper.trip(INTERRUPT)
        return True

    # --- actions ------------------------------------------------------------------

    def _shell(self, args: Mapping[str, Any], stopper: Stopper, sent: list[str], step_id: str | None) -> ActionResult:
        command = _required(args, "command", str)
        timeout = args.get("timeout_seconds", self.default_shell_timeout)
        if timeout is not None and (isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or timeout <= 0):
            raise StepFailed(f"timeout_seconds must be a positive number, got {timeout!r}")
        stopper.set_deadline(timeout)
        body, status, truncated = self._supervised(command, "shell command", stopper, sent, timeout)
        text = _decode(body, truncated)
        if status != 0:
            raise StepFailed(f"command exited with status {status}", output=text)
        return ActionResult(action="shell", output=text, exit_status=status, commands=tuple(sent))

    def _tap(self, args: Mapping[str, Any], stopper: Stopper, sent: list[str], step_id: str | None) -> ActionResult:
        payload = build.tap(_required(args, "x"), _required(args, "y"))
        return self._fixed("tap", [payload], stopper, sent)

    def _swipe(self, args: Mapping[str, Any], stopper: Stopper, sent: list[str], step_id: str | None) -> ActionResult:
        x1, y1, x2, y2 = (_required(args, name) for name in ("x1", "y1", "x2", "y2"))
        payload = build.swipe(x1, y1, x2, y2, duration_ms=args.get("duration_ms"))
        return self._fixed("swipe", [payload], stopper, sent)

    def _text(self, args: Mapping[str, Any], stopper: Stopper, sent: list[str], step_id: str | None) -> ActionResult:
        return self._fixed("text", build.text(_required(args, "text", str)), stopper, sent)

    def _keyevent(
        self, args: Mapping[str, Any], stopper: Stopper, sent: list[str], step_id: str | None
    ) -> ActionResult:
        return self._fixed("keyevent", [build.keyevent(_required(args, "key"))], stopper, sent)

    def _launch(self, args: Mapping[str, Any], stopper: Stopper, sent: list[str], step_id: str | None) -> ActionResult:
        payload = build.launch(_required(args, "package", str), args.get("activity"))
        return self._fixed("launch", [payload], stopper, sent)

    def _screenshot(
        self, args: Mapping[str, Any], stopper: Stopper, sent: list[str], step_id: str | None
    ) -> ActionResult:
        stopper.set_deadline(self.screenshot_timeout)
        sent.append(SCREENCAP)
        data = call(stopper, self._device.screencap)
        if stopper.tripped:
            self._raise_stopped(stopper, "screenshot", b"", self.screenshot_timeout)
        data = bytes(data or b"")
        if not data.startswith(_PNG_SIGNATURE) or not data.endswith(_PNG_END):
            raise StepFailed(
                f"screencap returned {len(data)} bytes that are not a complete PNG (device gone mid-transfer?)"
            )
        path = self._write_artifact(data, step_id or "screenshot", ".png")
        return ActionResult(action="screenshot", artifact=path, content_type=PNG, commands=tuple(sent))

    def _ui_dump(self, args: Mapping[str, Any], stopper: Stopper, sent: list[str], step_id: str | None) -> ActionResult:
        """Dump to a fresh device file, then read it back and delete it (two supervised calls).

        A file rather than `/dev/tty`: raw `shell:` has no terminal (specs/adb.md §6).
        """
        timeout = self.command_timeout
        stopper.set_deadline(timeout)
        path = build.ui_dump_path(build.new_token())
        body, status, _ = self._supervised(build.ui_dump(path), "ui dump", stopper, sent, timeout)
        said = body.decode("utf-8", "replace")
        if status != 0 or UI_DUMP_CONFIRMATION + path not in said:
            raise StepFailed(
                f"uiautomator dump did not write its file (exit status {status}): {said.strip()[-300:] or 'no output'}",
                output=said,
            )
        xml, status, truncated = self._supervised(
            build.read_and_remove(path), "reading the ui dump back", stopper, sent, timeout
        )
        if status != 0:
            raise StepFailed(
                f"reading the ui dump back exited with status {status}", output=xml.decode("utf-8", "replace")
            )
        if truncated:
            raise StepFailed(f"the ui dump is larger than {MAX_OUTPUT_BYTES} bytes")
        _check_hierarchy(xml)
        artifact = self._write_artifact(xml, step_id or "ui_dump", ".xml")
        return ActionResult(action="ui_dump", artifact=artifact, content_type=XML, commands=tuple(sent))

    def _logcat(self, args: Mapping[str, Any], stopper: Stopper, sent: list[str], step_id: str | None) -> ActionResult:
        command = build.logcat(args.get("lines", DEFAULT_LOGCAT_LINES))
        stopper.set_deadline(self.command_timeout)
        body, status, truncated = self._supervised(command, "logcat", stopper, sent, self.command_timeout)
        if status != 0:
            raise StepFailed(f"logcat exited with status {status}", output=body.decode("utf-8", "replace"))
        note = ""
        if truncated:  # the newest bytes were kept; the cut left a partial first line
            body = body[body.find(b"\n") + 1 :]
            note = f"the oldest lines were dropped: the log exceeded {MAX_OUTPUT_BYTES} bytes"
        artifact = self._write_artifact(body, step_id or "logcat", ".txt")
        return ActionResult(action="logcat", output=note, artifact=artifact, content_type=TEXT, commands=tuple(sent))

    def _wait(self, args: Mapping[str, Any], stopper: Stopper, sent: list[str], step_id: str | None) -> ActionResult:
        seconds = _required(args, "seconds")
        if isinstance(seconds, bool) or not isinstance(seconds, (int, float)) or seconds < 0:
            raise StepFailed(f"seconds must be a non-negative number, got {seconds!r}")
        if stopper.wait(seconds):
            raise Interrupted("interrupted while waiting")
        return ActionResult(action="wait")

    # --- helpers ------------------------------------------------------------------

    def _fixed(self, action: str, payloads: list[str], stopper: Stopper, sent: list[str]) -> ActionResult:
        """Run short commands whose failure shows in their output (input, am, monkey)."""
        stopper.set_deadline(self.command_timeout)
        texts = []
        for payload in payloads:
            sent.append(payload)
            output: StreamOutput = run_stream(self._device, payload, stopper)
            if stopper.tripped:
                self._raise_stopped(stopper, action, bytes(output.data), self.command_timeout)
            text = _decode(bytes(output.data), output.truncated)
            texts.append(text)
            errors = [match.group(0).strip() for match in _TOOL_ERROR.finditer(text)]
            if errors:
                raise StepFailed(f"{payload.split()[0]} reported: {'; '.join(errors)}", output="".join(texts))
        return ActionResult(action=action, output="".join(texts), commands=tuple(sent))

    def _supervised(
        self, command: str, what: str, stopper: Stopper, sent: list[str], timeout: float | None
    ) -> tuple[bytes, int, bool]:
        """Run `command` supervised (see `commands`); return (output, exit status, truncated).

        Raises StepTimedOut / Interrupted (after stopping it on the device) when `stopper`
        trips, and DeviceUnavailable when the output ends without its exit status.
        """
        token = build.new_token()
        payload = build.supervised(command, token)
        sent.append(payload)
        output = run_stream(self._device, payload, stopper)
        if stopper.tripped:
            partial, _ = build.split_exit_marker(bytes(output.data), token)
            note = self._stop_on_device(token, sent) if output.opened else "it had not started"
            self._raise_stopped(stopper, f"{what} ({note})", partial, timeout)
        body, status = build.split_exit_marker(bytes(output.data), token)
        if status is None:
            raise DeviceUnavailable(
                "the command's output ended before its exit status: the device "
                "or the adb connection went away mid-command",
                output=body.decode("utf-8", "replace"),
            )
        return body, status, output.truncated

    def _stop_on_device(self, token: str, sent: list[str]) -> str:
        """Kill a supervised command after its stream was cut; returns what happened."""
        payload = build.kill_supervised(token)
        sent.append(payload)
        stopper = Stopper()  # not the interrupted one: this call must still go through
        with stopper.active():
            stopper.set_deadline(self.cleanup_timeout)
            try:
                run_stream(self._device, payload, stopper)
            except AdbError as error:
                return f"could not stop it on the device: {error.reason}"
        if stopper.tripped:
            return "stopping it on the device timed out"
        return "stopped on the device"

    @staticmethod
    def _raise_stopped(stopper: Stopper, what: str, partial: bytes, timeout: float | None) -> None:
        text = partial.decode("utf-8", "replace")
        if stopper.reason == DEADLINE:
            raise StepTimedOut(f"{what} exceeded its {timeout} s deadline", output=text)
        raise Interrupted(f"{what} was interrupted", output=text)

    def _write_artifact(self, data: bytes, name: str, suffix: str) -> Path:
        self.artifacts_dir.mkdir(parents=True, exist_ok=True)
        stem = "-".join(_safe(part) for part in (self.serial, name))
        stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime())
        for attempt in range(1000):
            path = self.artifacts_dir / f"{stem}-{stamp}{f'-{attempt}' if attempt else ''}{suffix}"
            try:
                with open(path, "xb") as file:  # never overwrite an earlier artifact
                    file.write(data)
                return path
            except FileExistsError:
                continue
        raise StepFailed(f"cannot find a free artifact name for {stem}")


def _required(args: Mapping[str, Any], name: str, kind: type | None = None) -> Any:
    if name not in args:
        raise StepFailed(f"missing argument {name!r}")
    value = args[name]
    if kind is not None and not isinstance(value, kind):
        raise StepFailed(f"argument {name!r} must be {kind.__name__}, got {type(value).__name__}")
    return value


def _check_hierarchy(xml: bytes) -> None:
    """Fail unless `xml` is a whole `uiautomator dump` document."""
    try:
        root = ElementTree.fromstring(xml)
    except ElementTree.ParseError as error:
        raise StepFailed(f"the ui dump ({len(xml)} bytes) is not well-formed XML: {error}") from None
    if root.tag != "hierarchy":
        raise StepFailed(f"the ui dump's root element is <{root.tag}>, not <hierarchy>")


def _decode(data: bytes, truncated: bool) -> str:
    if truncated:
        data = data.lstrip(bytes(range(0x80, 0xC0)))  # the cut may split a UTF-8 character
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise StepFailed(f"the command printed non-UTF-8 output (byte {error.start})") from error


def _safe(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]", "_", text)[:80]
