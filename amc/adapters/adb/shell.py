"""The actions that run a command or read the log: `shell`, `logcat`, and `wait`."""

from __future__ import annotations

from typing import Any

from . import commands as build
from .calls import ActionResult, Call, decode, required
from .client import MAX_OUTPUT_BYTES
from .errors import StepFailed

DEFAULT_LOGCAT_LINES = 200
TEXT = "text/plain; charset=utf-8"


def shell(call: Call, args: dict[str, Any]) -> ActionResult:
    command = required(args, "command", str)
    timeout = args.get("timeout_seconds", call.limits.default_shell_timeout)
    if timeout is not None and (isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or timeout <= 0):
        raise StepFailed(f"timeout_seconds must be a positive number, got {timeout!r}")
    call.set_deadline(timeout)
    body, status, truncated = call.supervised(command, "shell command")
    text = decode(body, truncated)
    if status != 0:
        raise StepFailed(f"command exited with status {status}", output=text)
    return call.result("shell", output=text, exit_status=status)


def logcat(call: Call, args: dict[str, Any]) -> ActionResult:
    command = build.logcat(args.get("lines", DEFAULT_LOGCAT_LINES))
    call.set_deadline(call.limits.command_timeout)
    body, status, truncated = call.supervised(command, "logcat")
    if status != 0:
        raise StepFailed(f"logcat exited with status {status}", output=body.decode("utf-8", "replace"))
    note = ""
    if truncated:  # the newest bytes were kept; the cut left a partial first line
        body = body[body.find(b"\n") + 1 :]
        note = f"the oldest lines were dropped: the log exceeded {MAX_OUTPUT_BYTES} bytes"
    artifact = call.write_artifact(body, call.step_id or "logcat", ".txt")
    return call.result("logcat", output=note, artifact=artifact, content_type=TEXT)


def wait(call: Call, args: dict[str, Any]) -> ActionResult:
    seconds = required(args, "seconds")
    if isinstance(seconds, bool) or not isinstance(seconds, (int, float)) or seconds < 0:
        raise StepFailed(f"seconds must be a non-negative number, got {seconds!r}")
    call.pause(seconds)
    return call.result("wait")
