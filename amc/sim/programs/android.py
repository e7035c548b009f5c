"""The Android tools that read the device: getprop, wm, dumpsys, screencap, uiautomator
(dump) and logcat (`inputs` and `managers` hold the ones that change it).

Outputs imitate the real tools closely enough for parsers (specs/adb.md §1.5 and §6).
"""

from __future__ import annotations

from ..invocation import Invocation
from ..logcat import FORMATS, LogEntry
from ..screens import hierarchy_xml, screenshot_png, screenshot_raw


def getprop(inv: Invocation) -> int:
    properties = inv.device.properties
    if not inv.args:
        for key in sorted(properties):
            inv.out(f"[{key}]: [{properties[key]}]\n")
    else:
        default = inv.args[1] if len(inv.args) > 1 else ""
        inv.out(properties.get(inv.args[0], default) + "\n")
    return 0


def wm(inv: Invocation) -> int:
    spec = inv.device.spec
    if inv.args == ["size"]:
        inv.out(f"Physical size: {spec.width}x{spec.height}\n")
    elif inv.args == ["density"]:
        inv.out(f"Physical density: {inv.device.properties['ro.sf.lcd_density']}\n")
    else:
        inv.err("usage: wm [size|density]\n")
        return 1
    return 0


def dumpsys(inv: Invocation) -> int:
    foreground = inv.device.foreground
    package = foreground.split("/")[0]
    service = inv.args[0] if inv.args else ""
    if inv.args[:2] == ["activity", "top"]:
        inv.out(
            f"TASK {package} id=12 userId=0\n  ACTIVITY {foreground} 5f2a1b3 pid=12345\n"
            f"    mResumed=true mStopped=false mFinished=false\n"
        )
    elif service == "window":
        inv.out(
            f"  mCurrentFocus=Window{{1a2b3c u0 {foreground}}}\n  mFocusedApp=ActivityRecord{{9d8e7f u0 {foreground} t12}}\n"
        )
    elif service == "battery":
        inv.out(
            "Current Battery Service state:\n  AC powered: true\n  USB powered: false\n"
            "  status: 2\n  health: 2\n  present: true\n  level: 100\n  scale: 100\n"
        )
    else:
        inv.out(f"Can't find service: {service}\n")
    return 0


def screencap(inv: Invocation) -> int:
    """`screencap [-p] [FILE]`: a PNG with -p or a FILE ending in .png, else the raw frame."""
    paths = [arg for arg in inv.args if not arg.startswith("-")]
    as_png = "-p" in inv.args or (bool(paths) and paths[0].endswith(".png"))
    device = inv.device
    screen = device.screen()
    frame = screenshot_png(device.spec, screen) if as_png else screenshot_raw(device.spec, screen)
    if paths:
        device.files[paths[0]] = frame
    else:
        inv.out(frame)
    return 0


UI_DUMP_DEFAULT = "/sdcard/window_dump.xml"
_TO_STDOUT = ("/dev/tty", "/dev/stdout")


def uiautomator(inv: Invocation) -> int:
    """`uiautomator dump [--compressed] [FILE]`: the screen's UI tree as XML (`screens`).

    The XML goes to FILE (default /sdcard/window_dump.xml), or to the output for /dev/tty
    and /dev/stdout; either way the tool then prints its confirmation, with the real tool's
    misspelling ("hierchary").
    """
    args = inv.args
    rest = [arg for arg in args[1:] if arg != "--compressed"]
    if args[:1] != ["dump"] or len(rest) > 1 or any(arg.startswith("-") for arg in rest):
        inv.err(
            "Usage: uiautomator <subcommand> [options]\n\nAvailable subcommands:\n\n"
            "dump: creates an XML dump of current UI hierarchy\n"
            "    dump [--compressed] [file]\n"
        )
        return 1
    path = rest[0] if rest else UI_DUMP_DEFAULT
    xml = hierarchy_xml(inv.device.screen())
    if path in _TO_STDOUT:
        inv.out(xml)
    else:
        inv.device.files[path] = xml
    inv.out(f"UI hierchary dumped to: {path}\n")
    return 0


_LOGCAT_BUFFERS = ("main", "system", "crash", "events", "radio", "default", "all")


def logcat(inv: Invocation) -> int:
    """`logcat [-d] [-c] [-t N] [-v FORMAT] [-b BUFFER]`: print the device's log ring.

    Without `-d` or `-t` it follows the log until it is stopped, as the real tool does.
    `-t N` prints the last N lines and exits. Each buffer's first line is preceded by
    `--------- beginning of <buffer>`. Filter specs are not simulated.
    """
    args = list(inv.args)
    dump, count, fmt, buffers = False, None, "threadtime", set()
    while args:
        arg = args.pop(0)
        if arg == "-d":
            dump = True
        elif arg == "-c":
            inv.device.logcat.clear()
            return 0
        elif arg in ("-t", "-v", "-b") or (arg[:2] in ("-t", "-v", "-b") and len(arg) > 2):
            value = arg[2:] if len(arg) > 2 else (args.pop(0) if args else "")
            if arg.startswith("-t"):
                if not value.isdigit() or int(value) == 0:
                    inv.err(f"logcat: -t {value!r}: only a positive line count is simulated\n")
                    return 1
                dump, count = True, int(value)
            elif arg.startswith("-v"):
                if value not in FORMATS:
                    inv.err(f"logcat: Unknown format '{value}'\n")
                    return 1
                fmt = value
            else:
                if value not in _LOGCAT_BUFFERS:
                    inv.err(f"logcat: Unknown buffer '{value}'\n")
                    return 1
                buffers |= {"main", "system"} if value in ("default", "all") else {value}
        else:
            inv.err(f"logcat: '{arg}': options other than -d -c -t -v -b (and filter specs) are not simulated\n")
            return 1
    wanted = buffers or {"main", "system"}
    begun: set[str] = set()

    def show(entries: list[LogEntry]) -> None:
        for entry in entries:
            if entry.buffer not in begun:
                begun.add(entry.buffer)
                inv.out(f"--------- beginning of {entry.buffer}\n")
            inv.out(entry.line(fmt) + "\n")

    last = 0
    while True:
        everything = inv.device.logcat.entries(after=last)
        if everything:
            last = everything[-1].seq
        entries = [entry for entry in everything if entry.buffer in wanted]
        show(entries[-count:] if count else entries)
        if dump:
            return 0
        count = None
        inv.process.sleep(0.1)  # following: until a kill or a closed stream stops the process


PROGRAMS = {
    "getprop": getprop,
    "wm": wm,
    "dumpsys": dumpsys,
    "screencap": screencap,
    "uiautomator": uiautomator,
    "logcat": logcat,
}
