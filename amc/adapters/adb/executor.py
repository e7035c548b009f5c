"""Runs plan and session actions (specs/protocol.md, "Plan" and Part D) on one device
through ppadb.

    executor = AdbExecutor(BoundedClient("127.0.0.1", 5037), "emulator-5554",
                           artifacts_dir=Path("artifacts"), policy=ActionPolicy.load("policy.json"))
    result = executor.run("shell", {"command": "getprop ro.product.model", "timeout_seconds": 5})
    result = executor.run("tap", {"target": {"text": "Log in"}})

One executor serves one attempt: it remembers the attempt's last observation (`Memory`), which
`target.index` refers to. The handlers live in one module per family, each a function of a
`calls.Call` and the action's arguments:

- `shell`: shell, logcat, wait;
- `gestures`: tap, double_tap, long_press, swipe, scroll, scroll_until_visible, back, home, enter;
- `keyboard`: text, type;
- `waits`: wait_for, wait_for_idle, assert_visible, assert_not_visible;
- `apps`: launch, keyevent, stop_app, clear_app_data, open_url, set_orientation, list_apps;
- `observe`: screenshot, ui_tree, ui_dump (with `screen` for dumps and targets, `frames` for
  images);
- `packages`: install, uninstall (with `apk`, which reads an APK's manifest);
- `files`: push, pull (the sync service).
- `recording`: record (a screenrecord chain in a thread of its own, beside the steps; the
  attempt's end stops it with `finish_recording`).

The observations produce a file each, under `artifacts_dir`: `screenshot` an image (PNG, JPEG
or WebP, encoded on the host), `ui_dump` the `uiautomator dump` XML, `logcat` the device
log's last `lines` lines. The result names the file and its media type. The new actions'
outputs are JSON text (specs/protocol.md, "Outputs").

Outcomes: `run()` returns an `ActionResult`, or raises `ActionRefused` (the policy said no;
nothing was sent), `StepFailed` (and its `DeviceUnavailable` / `StepTimedOut`
subclasses) or `Interrupted` (another thread called `interrupt()`). The caller maps
them to the step statuses `completed`, `refused`, `failed` and `interrupted`.

Every action runs under a `Stopper` (see `guard`): a wall-clock deadline and
`interrupt()` both cut the action's ppadb connections at once. A `shell` action is
supervised (see `commands`): its exit status comes back as a marker, and when it is
stopped early a second call `pkill`s it on the device, since closing a raw shell stream
does not stop a silent process there (specs/adb.md §7). UI dumps and `logcat` run their
device commands supervised the same way.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from . import apps, files, gestures, keyboard, observe, packages, recording, shell, waits
from ._ppadb import Device
from .calls import ActionResult, Call, Limits, Memory
from .client import BoundedClient
from .errors import AdbError, StepFailed
from .guard import INTERRUPT, Stopper
from .policy import ActionPolicy

Handler = Callable[[Call, dict[str, Any]], ActionResult]

# The action table (specs/protocol.md): every action a plan step or a session action may name.
HANDLERS: dict[str, Handler] = {
    "shell": shell.shell,
    "tap": gestures.tap,
    "double_tap": gestures.double_tap,
    "long_press": gestures.long_press,
    "swipe": gestures.swipe,
    "scroll": gestures.scroll,
    "scroll_until_visible": gestures.scroll_until_visible,
    "back": gestures.back,
    "home": gestures.home,
    "enter": gestures.enter,
    "text": keyboard.text,
    "type": keyboard.type_text,
    "keyevent": apps.keyevent,
    "launch": apps.launch,
    "stop_app": apps.stop_app,
    "clear_app_data": apps.clear_app_data,
    "open_url": apps.open_url,
    "set_orientation": apps.set_orientation,
    "list_apps": apps.list_apps,
    "wait": shell.wait,
    "wait_for": waits.wait_for,
    "wait_for_idle": waits.wait_for_idle,
    "assert_visible": waits.assert_visible,
    "assert_not_visible": waits.assert_not_visible,
    "screenshot": observe.screenshot,
    "ui_tree": observe.ui_tree,
    "ui_dump": observe.ui_dump,
    "logcat": shell.logcat,
    # apps and files (specs/protocol.md Part F): the inputs are local files by the time they run
    "install": packages.install,
    "uninstall": packages.uninstall,
    "push": files.push,
    "pull": files.pull,
    # -- screen recording (issue 26) --
    "record": recording.record,
}

__all__ = ["ActionResult", "AdbExecutor", "HANDLERS"]


class AdbExecutor:
    """Runs actions on one device, one at a time; `interrupt()` may come from any thread.

    Args:
        client: the adb server connection (a BoundedClient, so calls cannot hang).
        serial: the device.
        artifacts_dir: where observations are written (created if missing).
        policy: the host's action policy; None allows everything.
        default_shell_timeout: deadline of a `shell` step without `timeout_seconds`
            (None: no deadline).
        command_timeout: deadline of the short actions (gestures, keys, apps, typing, the
            assertions, `ui_tree`, `ui_dump`, `logcat`); the waits add their own timeout to it.
        screenshot_timeout: deadline of a screenshot.
        cleanup_timeout: deadline of the `pkill` that stops a cut-short shell step.
    """

    ACTIONS = tuple(HANDLERS)

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
        self.limits = Limits(
            default_shell_timeout=default_shell_timeout,
            command_timeout=command_timeout,
            screenshot_timeout=screenshot_timeout,
            cleanup_timeout=cleanup_timeout,
        )
        self.memory = Memory()
        self._device = Device(client, serial)
        self._lock = threading.Lock()
        self._current: Stopper | None = None

    def run(
        self,
        action: str,
        args: Mapping[str, Any] | None = None,
        *,
        step_id: str | None = None,
        inputs: Mapping[str, Path] | None = None,
    ) -> ActionResult:
        """Run one action and return its result; raises ActionRefused, StepFailed or Interrupted.

        `step_id` only names artifacts (e.g. the screenshot file). `inputs`: the local files of
        the inputs the arguments name, by sha256 (`install`, `push`).
        """
        arguments = dict(args or {})
        handler = HANDLERS.get(action)
        if handler is None:
            raise StepFailed(f"unknown action {action!r}")
        self.policy.check(action, arguments)
        stopper = Stopper()
        with self._lock:
            if self._current is not None:
                raise RuntimeError("an AdbExecutor runs one action at a time")
            self._current = stopper
        call = Call(
            device=self._device,
            serial=self.serial,
            stopper=stopper,
            limits=self.limits,
            memory=self.memory,
            artifacts_dir=self.artifacts_dir,
            step_id=step_id,
            inputs=dict(inputs or {}),
        )
        try:
            with stopper.active():
                return handler(call, arguments)
        except AdbError as error:
            error.commands = tuple(call.sent)
            raise
        finally:
            with self._lock:
                self._current = None

    def start_recording(self) -> None:
        """Start the attempt's screen recording outside any step (a plan's ``"record": true``);
        StepFailed if one runs."""
        stopper = Stopper()
        with stopper.active():
            stopper.set_deadline(self.limits.command_timeout)
            recording.start(self._device, self.memory, stopper)
        if stopper.tripped:
            raise StepFailed(f"screenrecord did not start within {self.limits.command_timeout} s")

    def finish_recording(self) -> tuple[Path, ...]:
        """The attempt's end: stop a recording still running and fetch its segments (none if
        nothing records). Raises StepFailed (or DeviceUnavailable) if they cannot be fetched."""
        if self.memory.recording is None:
            return ()
        stopper = Stopper()
        with stopper.active():
            stopper.set_deadline(self.limits.command_timeout)
            stopped = recording.stop(
                self._device, self.memory, self.artifacts_dir, stopper, self.limits.command_timeout
            )
        if stopper.tripped:
            raise StepFailed(f"fetching the recording exceeded its {self.limits.command_timeout} s deadline")
        return stopped.files

    def abandon_recording(self) -> None:
        """The attempt is torn down without its end (a forced shutdown): stop the recording's
        chain at once, fetching nothing. Nothing happens when nothing records."""
        if self.memory.recording is not None:
            self.memory.recording.abandon()
            self.memory.recording = None

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
