"""Generic shell utilities, plus the simulator's own test programs (`amc-sim-*`)."""

from __future__ import annotations

import re
import time

from ..invocation import Invocation, parse_duration


def echo(inv: Invocation) -> int:
    args = list(inv.args)
    newline = True
    if args and args[0] == "-n":
        newline = False
        args.pop(0)
    inv.out(" ".join(args) + ("\n" if newline else ""))
    return 0


def true(inv: Invocation) -> int:
    return 0


def false(inv: Invocation) -> int:
    return 1


def sleep(inv: Invocation) -> int:
    if len(inv.args) != 1 or (seconds := parse_duration(inv.args[0])) is None:
        inv.err(f"sleep: invalid number '{' '.join(inv.args)}'\n")
        return 1
    inv.process.sleep(seconds)
    return 0


def cat(inv: Invocation) -> int:
    if not inv.args:
        inv.out(inv.stdin)
        return 0
    status = 0
    for path in inv.args:
        if path == "-":
            inv.out(inv.stdin)
        elif path in inv.device.files:
            inv.out(inv.device.files[path])
        else:
            inv.err(f"cat: {path}: No such file or directory\n")
            status = 1
    return status


def grep(inv: Invocation) -> int:
    args = list(inv.args)
    invert = ignore_case = fixed = quiet = False
    while args and args[0].startswith("-") and len(args[0]) > 1:
        for flag in args.pop(0)[1:]:
            if flag == "v":
                invert = True
            elif flag == "i":
                ignore_case = True
            elif flag == "F":
                fixed = True
            elif flag == "q":
                quiet = True
            elif flag != "E":
                inv.err(f"grep: Unknown option '{flag}'\n")
                return 2
    if not args:
        inv.err("grep: Need 1 argument\n")
        return 2
    pattern = re.escape(args[0]) if fixed else args[0]
    regex = re.compile(pattern, re.IGNORECASE if ignore_case else 0)
    sources = [inv.stdin] if len(args) == 1 else [inv.device.files.get(p, b"") for p in args[1:]]
    matched = False
    for source in sources:
        for line in source.decode("utf-8", "replace").splitlines(keepends=True):
            if bool(regex.search(line.rstrip("\n"))) != invert:
                matched = True
                if not quiet:
                    inv.out(line if line.endswith("\n") else line + "\n")
    return 0 if matched else 1


def rm(inv: Invocation) -> int:
    force = any(arg.startswith("-") and "f" in arg for arg in inv.args)
    status = 0
    for path in (arg for arg in inv.args if not arg.startswith("-")):
        if inv.device.files.pop(path, None) is None and not force:
            inv.err(f"rm: {path}: No such file or directory\n")
            status = 1
    return status


def mkdir(inv: Invocation) -> int:
    # The file store is flat (path -> bytes), so directories always exist.
    return 0


def ticker(inv: Invocation) -> int:
    """`amc-sim-ticker SECONDS [INTERVAL]`: a chatty long-running command.

    Prints `tick N` every INTERVAL (default 0.1 s) for SECONDS, so a closed stream shows
    up on its next write, the way SIGPIPE stops a chatty process on a real device.
    """
    if not inv.args or (duration := parse_duration(inv.args[0])) is None:
        inv.err("usage: amc-sim-ticker SECONDS [INTERVAL]\n")
        return 1
    interval = parse_duration(inv.args[1]) if len(inv.args) > 1 else 0.1
    if not interval:
        inv.err("amc-sim-ticker: bad interval\n")
        return 1
    start = time.monotonic()
    count = 0
    while True:
        count += 1
        inv.out(f"tick {count}\n")
        remaining = duration - (time.monotonic() - start)
        if remaining <= 0:
            return 0
        inv.process.sleep(min(interval, remaining))


def raw_bytes(inv: Invocation) -> int:
    """`amc-sim-bytes HEX...`: write arbitrary bytes (e.g. non-UTF-8 output)."""
    try:
        inv.out(bytes.fromhex("".join(inv.args)))
    except ValueError:
        inv.err("amc-sim-bytes: arguments must be hex\n")
        return 1
    return 0


PROGRAMS = {
    "echo": echo,
    "true": true,
    "false": false,
    "sleep": sleep,
    "cat": cat,
    "grep": grep,
    "rm": rm,
    "mkdir": mkdir,
    "amc-sim-ticker": ticker,
    "amc-sim-bytes": raw_bytes,
}
