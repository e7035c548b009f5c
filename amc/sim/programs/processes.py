"""ps, kill, pkill and pgrep over the device's simulated process table.

Matching follows toybox: `pkill PATTERN` matches the process name, `pkill -f PATTERN`
the whole command line, both as an extended regex, and neither ever matches the calling
process. The classic `pkill -f 'amc-ste[p]-1'` trick therefore behaves as on a device.
"""

from __future__ import annotations

import re

from ..invocation import Invocation

_SIGNALS = {"1": "SIGHUP", "2": "SIGINT", "9": "SIGKILL", "15": "SIGTERM"}


def _signal_name(text: str) -> str | None:
    text = text.upper()
    if text in _SIGNALS:
        return _SIGNALS[text]
    name = text if text.startswith("SIG") else "SIG" + text
    return name if name in _SIGNALS.values() else None


def _split_signal(args: list[str]) -> tuple[str | None, list[str], bool]:
    """Return (signal, remaining args, full-match flag); signal None means a bad option."""
    signal: str | None = "SIGTERM"
    full = False
    rest: list[str] = []
    iterator = iter(args)
    for arg in iterator:
        if arg == "-f":
            full = True
        elif arg == "-s":
            signal = _signal_name(next(iterator, ""))
        elif arg.startswith("-") and len(arg) > 1 and not rest:
            signal = _signal_name(arg[1:])
        else:
            rest.append(arg)
        if signal is None:
            break
    return signal, rest, full


def kill(inv: Invocation) -> int:
    signal, pids, _ = _split_signal(inv.args)
    if signal is None or not pids:
        inv.err("usage: kill [-s SIGNAL | -SIGNAL] PID...\n")
        return 1
    status = 0
    table = {process.pid: process for process in inv.device.processes()}
    for pid in pids:
        process = table.get(int(pid)) if pid.isdigit() else None
        if process is None:
            inv.err(f"kill: {pid}: No such process\n")
            status = 1
        else:
            process.kill(signal)
    inv.process.check()  # `kill $$` ends the caller too
    return status


def pkill(inv: Invocation) -> int:
    signal, rest, full = _split_signal(inv.args)
    if signal is None or len(rest) != 1:
        inv.err("usage: pkill [-f] [-SIGNAL] PATTERN\n")
        return 2
    try:
        found = inv.device.find_processes(rest[0], full=full, exclude=inv.process.pid)
    except re.error as error:
        inv.err(f"pkill: bad regex '{rest[0]}': {error}\n")
        return 2
    for process in found:
        process.kill(signal)
    return 0 if found else 1


def pgrep(inv: Invocation) -> int:
    _, rest, full = _split_signal([a for a in inv.args if a != "-l"])
    if len(rest) != 1:
        inv.err("usage: pgrep [-f] PATTERN\n")
        return 2
    found = inv.device.find_processes(rest[0], full=full, exclude=inv.process.pid)
    for process in found:
        inv.out(f"{process.pid}\n")
    return 0 if found else 1


def ps(inv: Invocation) -> int:
    inv.out("USER           PID  PPID     VSZ    RSS WCHAN            ADDR S NAME\n")
    rows = [("root", 1, 0, "init"), ("system", 1100, 1, "system_server")]
    for process in inv.device.processes():
        rows.append(("shell", process.pid, 1, process.cmdline))
    for user, pid, ppid, name in rows:
        inv.out(f"{user:<10} {pid:>7} {ppid:>5} 0 0 0 0 S {name}\n")
    return 0


PROGRAMS = {"kill": kill, "pkill": pkill, "pgrep": pgrep, "ps": ps}
