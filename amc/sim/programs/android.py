"""The Android tools agents use: getprop, input, am, monkey, wm, dumpsys, screencap, pm,
uiautomator (dump) and logcat.

Outputs imitate the real tools closely enough for parsers (specs/adb.md §1.5 and §6); the
parts of the behaviour that were never checked on a device (exit codes of `am` and
`monkey` failures, `input`'s errors) are chosen to be plausible and easy to detect.
"""

from __future__ import annotations

import re

from ..invocation import Invocation
from ..logcat import FORMATS, LogEntry
from ..screens import hierarchy_xml, screenshot_png
from ..spec import LAUNCHER

LAUNCHER_INTENT = "android.intent.category.LAUNCHER"

# A small part of KeyEvent's table (ppadb keycode.py): enough for agents' keys.
KEYCODES = {
    "HOME": 3,
    "BACK": 4,
    "CALL": 5,
    "ENDCALL": 6,
    "DPAD_UP": 19,
    "DPAD_DOWN": 20,
    "DPAD_LEFT": 21,
    "DPAD_RIGHT": 22,
    "DPAD_CENTER": 23,
    "VOLUME_UP": 24,
    "VOLUME_DOWN": 25,
    "POWER": 26,
    "CAMERA": 27,
    "TAB": 61,
    "SPACE": 62,
    "ENTER": 66,
    "DEL": 67,
    "MENU": 82,
    "SEARCH": 84,
    "MEDIA_PLAY_PAUSE": 85,
    "ESCAPE": 111,
    "FORWARD_DEL": 112,
    "APP_SWITCH": 187,
    "SLEEP": 223,
    "WAKEUP": 224,
    **{str(digit): 7 + digit for digit in range(10)},
    **{chr(ord("A") + index): 29 + index for index in range(26)},
}
_INPUT_SOURCES = {
    "touchscreen",
    "touchpad",
    "keyboard",
    "mouse",
    "trackball",
    "stylus",
    "dpad",
    "gamepad",
    "joystick",
    "touchnavigation",
}
_NUMBER = re.compile(r"^-?\d+(\.\d+)?$")


def getprop(inv: Invocation) -> int:
    properties = inv.device.properties
    if not inv.args:
        for key in sorted(properties):
            inv.out(f"[{key}]: [{properties[key]}]\n")
    else:
        default = inv.args[1] if len(inv.args) > 1 else ""
        inv.out(properties.get(inv.args[0], default) + "\n")
    return 0


def decode_input_text(text: str) -> str:
    """What `input text` types: Input.java turns each `%s` into a space, scanning left to right."""
    typed = []
    i = 0
    while i < len(text):
        if text[i] == "%" and i + 1 < len(text) and text[i + 1] == "s":
            typed.append(" ")
            i += 2
        else:
            typed.append(text[i])
            i += 1
    return "".join(typed)


def _usage(inv: Invocation, message: str) -> int:
    inv.err(f"Error: {message}\n")
    inv.err("Usage: input [<source>] <command> [<arg>...]\n")
    return 1


def input_(inv: Invocation) -> int:
    args = list(inv.args)
    if args and args[0] in _INPUT_SOURCES:
        args.pop(0)
    if not args:
        return _usage(inv, "missing command")
    command, rest = args[0], args[1:]
    device = inv.device
    if command in ("tap", "swipe"):
        wanted = (2,) if command == "tap" else (4, 5)
        if len(rest) not in wanted or not all(_NUMBER.match(value) for value in rest):
            return _usage(inv, f"Invalid arguments for command: {command}")
        _event(inv, " ".join([command, *rest]))
        if command == "tap":
            _tap(inv, round(float(rest[0])), round(float(rest[1])))
    elif command == "text":
        # Input.java takes exactly one argument: unquoted spaces are a caller's bug.
        if len(rest) != 1:
            return _usage(inv, "Invalid arguments for command: text")
        typed = decode_input_text(rest[0])
        if any(not (" " <= char <= "~") for char in typed):
            inv.err("Error: the virtual keyboard cannot type non-ASCII or control characters\n")
            return 1
        _event(inv, f"text {typed}")
        device.typed_text += typed
    elif command == "keyevent":
        keys = [key for key in rest if not key.startswith("--")]
        if not keys:
            return _usage(inv, "Invalid arguments for command: keyevent")
        for key in keys:
            name = key[len("KEYCODE_") :] if key.startswith("KEYCODE_") else key
            if not key.isdigit() and name not in KEYCODES:
                inv.err(f"Error: unknown keycode '{key}'\n")
                return 1
            code = int(key) if key.isdigit() else KEYCODES[name]
            _event(inv, f"keyevent {code}" + (" longpress" if "--longpress" in rest else ""))
            if code == KEYCODES["HOME"]:
                device.home()
            elif code == KEYCODES["BACK"]:
                device.back()
    elif command in ("press", "roll"):
        _event(inv, " ".join([command, *rest]))
    else:
        return _usage(inv, f"Unknown command: {command}")
    return 0


def _event(inv: Invocation, event: str) -> None:
    """Record an injected input event, in the device's event list and in its log."""
    inv.device.input_events.append(event)
    inv.device.logcat.log("I", "Input", f"injectInputEvent: {event}", pid=inv.process.pid)


def _tap(inv: Invocation, x: int, y: int) -> None:
    """A tap on a row that opens an activity opens it (see `screens`); elsewhere it changes nothing."""
    target = inv.device.screen().tap_target(x, y)
    if target is not None and target.opens is not None:
        package, activity = target.opens.split("/", 1)
        resolved = _resolve(inv, package, activity)
        if resolved is not None:
            inv.device.open_activity(resolved)


def _resolve(inv: Invocation, package: str, activity: str | None) -> str | None:
    """Return "package/activity" if the device has it (launcher activity when None)."""
    activities = inv.device.spec.packages.get(package)
    if not activities:
        return None
    if activity is None:
        return f"{package}/{activities[0]}"

    def full(name: str) -> str:
        return package + name if name.startswith(".") else name

    for known in activities:
        if full(known) == full(activity):
            return f"{package}/{known}"
    return None


def am(inv: Invocation) -> int:
    args = list(inv.args)
    if not args:
        inv.err("usage: am [subcommand] [options]\n")
        return 1
    command, rest = args[0], args[1:]
    device = inv.device
    if command == "force-stop":
        if len(rest) != 1:
            inv.err("Error: force-stop needs exactly one package\n")
            return 1
        device.force_stop(rest[0])
        return 0
    if command != "start":
        inv.err(f"Error: unknown command '{command}'\n")
        return 1
    component = None
    options = iter(rest)
    for option in options:
        if option == "-n":
            component = next(options, None)
        elif option in ("-a", "-c", "-d", "-t", "--user"):
            next(options, None)
    if not component or "/" not in component:
        inv.out("Error: am start needs -n PACKAGE/ACTIVITY in the simulator\n")
        return 1
    package, activity = component.split("/", 1)
    inv.out(f"Starting: Intent {{ cmp={component} }}\n")
    resolved = _resolve(inv, package, activity)
    if resolved is None:
        full = package + activity if activity.startswith(".") else activity
        inv.out(f"Error type 3\nError: Activity class {{{package}/{full}}} does not exist.\n")
        return 1
    device.open_activity(resolved)
    return 0


def monkey(inv: Invocation) -> int:
    args = list(inv.args)
    package = args[args.index("-p") + 1] if "-p" in args[:-1] else None
    resolved = _resolve(inv, package, None) if package else None
    if resolved is None:
        inv.out("** No activities found to run, monkey aborted.\n")
        return 1
    inv.device.open_activity(resolved)
    inv.out("  bash arg: " + "\n  bash arg: ".join(args) + "\n")
    inv.out("Events injected: 1\n## Network stats: elapsed time=12ms (0ms mobile, 0ms wifi, 12ms not connected)\n")
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
    foreground = inv.device.foreground or LAUNCHER
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
    paths = [arg for arg in inv.args if not arg.startswith("-")]
    png = screenshot_png(inv.device.spec, inv.device.screen())
    if paths:
        inv.device.files[paths[0]] = png
    else:
        inv.out(png)
    return 0


def pm(inv: Invocation) -> int:
    args = [arg for arg in inv.args if arg]
    packages = inv.device.spec.packages
    if args[:2] == ["list", "packages"]:
        for package in sorted(packages):
            inv.out(f"package:{package}\n")
        return 0
    if args[:1] == ["path"] and len(args) == 2:
        if args[1] not in packages:
            return 1
        inv.out(f"package:/data/app/~~sim/{args[1]}-1/base.apk\n")
        return 0
    if args[:1] == ["clear"] and len(args) == 2:
        inv.out("Success\n" if args[1] in packages else "Failed\n")
        return 0
    if args[:1] == ["install"] and len(args) >= 2:
        if args[-1] in inv.device.files:
            inv.out("Performing Streamed Install\nSuccess\n")
            return 0
        inv.out(f"Error: Can't open file: {args[-1]}\n")
        return 1
    inv.err("usage: pm [list packages|path|clear|install] ...\n")
    return 1


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
    "input": input_,
    "am": am,
    "monkey": monkey,
    "wm": wm,
    "dumpsys": dumpsys,
    "screencap": screencap,
    "pm": pm,
    "uiautomator": uiautomator,
    "logcat": logcat,
}
