"""Reading the screen: a fresh UI dump as a `Screen`, waiting for it to settle, and finding
the element a `target` names.

Every element action reads its target from a dump taken as it runs (never from an earlier
observation), so it acts on what is on the screen now. `target.index` is the exception the
protocol allows: it names an element of the attempt's last observation, and is honoured
only while a fresh dump still has that observation's fingerprint (`amc.core.ui.selectors`).

A dump is one supervised round trip (`commands.ui_dump`): `uiautomator dump FILE`, which
confirms on stdout, then the file's bytes, then its removal. A file rather than
`/dev/tty`, since raw `shell:` has no terminal (specs/adb.md §8.1).
"""

from __future__ import annotations

import time
from typing import Any

import attrs

from amc.core.ui.selectors import Found, NotFound, excerpt, find_all, resolve
from amc.core.ui.settle import Pending, Settled, SettleWatch
from amc.core.ui.target import Selector, SelectorError, parse_target
from amc.core.ui.tree import DumpError, Element, Screen, parse_dump

from . import commands as build
from .calls import Call
from .errors import StepFailed

# What `uiautomator dump FILE` prints once FILE is written, misspelt as the tool spells it.
UI_DUMP_CONFIRMATION = b"UI hierchary dumped to: "
# Observations wait this long at most for two consecutive dumps to agree (the contract's bound).
SETTLE_TIMEOUT = 2.0
# Between the samples of a settle: short, since a dump itself takes a while on a phone (and
# uiautomator waits for its own idle state before it dumps).
SETTLE_INTERVAL = 0.02


@attrs.frozen
class Dump:
    """A dump as read: its XML and the screen parsed from it."""

    xml: bytes
    screen: Screen


@attrs.frozen
class Observation:
    """The screen an observation reports, and whether it had settled."""

    dump: Dump
    settled: bool
    note: str = ""  # why it did not settle


def dump(call: Call) -> Dump:
    """A fresh dump of the screen; StepFailed if the tool did not write one or it does not parse."""
    path = build.ui_dump_path(build.new_token())
    body, status, truncated = call.supervised(build.ui_dump(path), "ui dump")
    confirmation = UI_DUMP_CONFIRMATION + path.encode()
    _, found, xml = body.partition(confirmation)
    if status != 0 or not found:
        text = body.decode("utf-8", "replace").strip()
        raise StepFailed(
            f"uiautomator dump did not write its file (exit status {status}): {text[-300:] or 'no output'}",
            output=body.decode("utf-8", "replace"),
        )
    if truncated:
        raise StepFailed("the ui dump is larger than the output bound of 1 MiB")
    xml = xml.lstrip(b"\r\n")
    try:
        screen = parse_dump(xml)
    except DumpError as error:
        raise StepFailed(f"the ui dump ({len(xml)} bytes) is not a view hierarchy: {error}") from None
    return Dump(xml, screen)


def observe(call: Call, settle: bool) -> Observation:
    """The screen once it has settled (two consecutive dumps agree), or its first dump if not
    `settle`; after SETTLE_TIMEOUT it goes on with the last dump, saying so."""
    if not settle:
        return Observation(dump(call), settled=True)
    return wait_until_settled(call, quiet=0.0, timeout=SETTLE_TIMEOUT)


def wait_until_settled(call: Call, *, quiet: float, timeout: float) -> Observation:
    """Dump until the screen's fingerprint holds for `quiet` seconds (0: two dumps in a row)."""
    watch = SettleWatch(quiet=quiet, timeout=timeout, started_at=time.monotonic(), interval=SETTLE_INTERVAL)
    while True:
        latest = dump(call)
        verdict = watch.sample(time.monotonic(), latest.screen.fingerprint)
        if isinstance(verdict, Settled):
            return Observation(latest, settled=True)
        if not isinstance(verdict, Pending):
            return Observation(latest, settled=False, note=verdict.reason)
        call.pause(verdict.sample_at - time.monotonic())


def selector(args: dict[str, Any], *, index: bool = True) -> Selector:
    """The action's `target`; StepFailed with the selector's own sentence if it is not one."""
    try:
        parsed = parse_target(args.get("target"))
    except SelectorError as error:
        raise StepFailed(f"argument 'target': {error}") from None
    if parsed.by_index and not index:
        raise StepFailed("argument 'target': this action takes a selector, not target.index")
    return parsed


def locate(call: Call, target: Selector) -> tuple[Found, Screen]:
    """The element `target` names on a fresh dump (and that dump); StepFailed if none."""
    fresh = dump(call).screen
    found = resolve(target, fresh, call.memory.observed)
    if isinstance(found, NotFound):
        raise StepFailed(found.reason)
    return found, fresh


def visible(target: Selector, screen: Screen) -> Element | None:
    """The element `target` (not an index) picks on `screen`, if it is there."""
    matches = find_all(target, screen)
    nth = target.nth or 0
    return matches[nth] if nth < len(matches) else None


def showed(screen: Screen) -> str:
    """What a reason quotes of a screen: `the screen showed: "A", "B", ... (n elements)`."""
    return excerpt(screen)
