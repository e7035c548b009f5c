"""Waiting for the screen and asserting on it: wait_for, wait_for_idle, assert_visible,
assert_not_visible.

`wait_for` dumps the screen every `POLL` seconds until its target shows (or, with `gone`, no
longer shows), within `timeout_seconds`; a dump taken when the time is up still counts. The
assertions look at one fresh dump. A failure's reason is one sentence quoting the screen.
"""

from __future__ import annotations

import time
from typing import Any

from .calls import ActionResult, Call, as_json, flag, number
from .errors import StepFailed
from .screen import dump, selector, showed, visible, wait_until_settled

POLL = 0.2


def wait_for(call: Call, args: dict[str, Any]) -> ActionResult:
    target = selector(args, index=False)
    gone = flag(args, "gone", False)
    timeout = number(args, "timeout_seconds", 10.0, 0.0, 600.0, open_low=True)
    call.set_deadline(timeout + call.limits.command_timeout)
    started = time.monotonic()
    while True:
        screen = dump(call).screen
        waited = time.monotonic() - started
        element = visible(target, screen)
        if gone and element is None:
            return call.result("wait_for", output=as_json({"gone": True, "waited_ms": round(waited * 1000)}))
        if element is not None and not gone:
            output = {"element": element.to_json(), "waited_ms": round(waited * 1000)}
            return call.result("wait_for", output=as_json(output))
        if waited >= timeout:
            if gone and element is not None:
                raise StepFailed(f"{target.describe()} still visible after {timeout:g} s: {element.line()}")
            raise StepFailed(f"{target.describe()} not visible after {timeout:g} s; {showed(screen)}")
        call.pause(min(POLL, timeout - waited))


def assert_visible(call: Call, args: dict[str, Any]) -> ActionResult:
    target = selector(args, index=False)
    call.set_deadline(call.limits.command_timeout)
    screen = dump(call).screen
    element = visible(target, screen)
    if element is None:
        raise StepFailed(f"{target.describe()} is not visible; {showed(screen)}")
    return call.result("assert_visible", output=as_json({"element": element.to_json()}))


def assert_not_visible(call: Call, args: dict[str, Any]) -> ActionResult:
    target = selector(args, index=False)
    call.set_deadline(call.limits.command_timeout)
    element = visible(target, dump(call).screen)
    if element is not None:
        raise StepFailed(f"{target.describe()} is visible: {element.line()}")
    return call.result("assert_not_visible", output=as_json({"visible": False}))


def wait_for_idle(call: Call, args: dict[str, Any]) -> ActionResult:
    """Until the UI tree has not changed for `quiet_ms`, within `timeout_seconds`."""
    quiet = number(args, "quiet_ms", 500, 0, 60_000) / 1000
    timeout = number(args, "timeout_seconds", 10.0, 0.0, 600.0, open_low=True)
    call.set_deadline(timeout + call.limits.command_timeout)
    started = time.monotonic()
    seen = wait_until_settled(call, quiet=quiet, timeout=timeout)
    if not seen.settled:
        raise StepFailed(seen.note)
    waited = round((time.monotonic() - started) * 1000)
    return call.result(
        "wait_for_idle",
        output=as_json({"idle": True, "waited_ms": waited, "fingerprint": seen.dump.screen.fingerprint}),
    )
