"""The Android tools agents use: getprop, input, am, monkey, wm, dumpsys, screencap, pm.

Outputs imitate the real tools closely enough for parsers (specs/adb.md §1.5 and §6); the
parts of the behaviour that were never checked on a device (exit codes of `am` and
`monkey` failures, `input`'s errors) are chosen to be plausible and easy to detect.
"""

from __future__ import annotations

import hashlib
import re

from ..png import render_screen
from ..invocation import Invocation

LAUNCHER = "com.android.launcher3/.Launcher"
LAUNCHER_INTENT = "android.intent.category.LAUNCHER"

# A small part of KeyEvent's table (ppadb keycode.py): enough for agents' keys.
KEYCODES = {
    "HOME": 3, "BACK": 4, "CALL": 5, "ENDCALL": 6, "DPAD_UP": 19, "DPAD_DOWN": 20,
    "DPAD_LEFT": 21, "DPAD_RIGHT": 22, "DPAD_CENTER": 23, "VOLUME_UP": 24,
    "VOLUME_DOWN": 25, "POWER": 26, "CAMERA": 27, "TAB": 61, "SPACE": 62, "ENTER": 66,
    "DEL": 67, "MENU": 82, "SEARCH": 84, "MEDIA_PLAY_PAUSE": 85, "ESCAPE": 111,
    "FORWARD_DEL": 112, "APP_SWITCH": 187, "SLEEP": 223, "WAKEUP": 224,
    **{str(digit): 7 + digit for digit in range(10)},
    **{chr(ord("A") + index): 29 + index for index in range(26)},
}
_INPUT_SOURCES = {"touchscreen", "touchpad", "keyboard", "mouse", "trackball", "stylus",
                  "dpad", "gamepad", "joystick", "touchnavigation"}
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
        device.input_events.append(" ".join([command, *rest]))
    elif command == "text":
        # Input.java takes exactly one argument: unquoted spaces are a caller's bug.
        if len(rest) != 1:
            return _usage(inv, "Invalid arguments for command: text")
        typed = decode_input_text(rest[0])
        if any(not (" " <= char <= "~") for char in typed):
            inv.err("Error: the virtual keyboard cannot type non-ASCII or control characters\n")
            return 1
        device.input_events.append(f"text {typed}")
        device.typed_text += typed
    elif command == "keyevent":
        keys = [key for key in rest if not key.startswith("--")]
        if not keys:
            return _usage(inv, "Invalid arguments for command: keyevent")
        for key in keys:
            name = key[len("KEYCODE_"):] if key.startswith("KEYCODE_") else key
            if not key.isdigit() and name not in KEYCODES:
                inv.err(f"Error: unknown keycode '{key}'\n")
                return 1
            code = int(key) if key.isdigit() else KEYCODES[name]
            device.input_events.append(f"keyevent {code}" + (" longpress" if "--longpress" in rest else ""))
            if code == KEYCODES["HOME"]:
                device.foreground = LAUNCHER
    elif command in ("press", "roll"):
        device.input_events.append(" ".join([command, *rest]))
    else:
        return _usage(inv, f"Unknown command: {command}")
    return 0


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
        if device.foreground and device.foreground.split("/")[0] == rest[0]:
            device.foreground = LAUNCHER
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
    device.foreground = resolved
    return 0


def monkey(inv: Invocation) -> int:
    args = list(inv.args)
    package = args[args.index("-p") + 1] if "-p" in args[:-1] else None
    resolved = _resolve(inv, package, None) if package else None
    if resolved is None:
        inv.out("** No activities found to run, monkey aborted.\n")
        return 1
    inv.device.foreground = resolved
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
        inv.out(f"TASK {package} id=12 userId=0\n  ACTIVITY {foreground} 5f2a1b3 pid=12345\n"
                f"    mResumed=true mStopped=false mFinished=false\n")
    elif service == "window":
        inv.out(f"  mCurrentFocus=Window{{1a2b3c u0 {foreground}}}\n  mFocusedApp=ActivityRecord{{9d8e7f u0 {foreground} t12}}\n")
    elif service == "battery":
        inv.out("Current Battery Service state:\n  AC powered: true\n  USB powered: false\n"
                "  status: 2\n  health: 2\n  present: true\n  level: 100\n  scale: 100\n")
    else:
        inv.out(f"Can't find service: {service}\n")
    return 0


def screenshot_png(inv: Invocation) -> bytes:
    """The current screen: a colour per foreground app, so screens differ visibly."""
    foreground = inv.device.foreground or LAUNCHER
    digest = hashlib.sha256(foreground.encode()).digest()
    spec = inv.device.spec
    return render_screen(spec.width, spec.height, (digest[0], digest[1], digest[2]), (32, 33, 36))


def screencap(inv: Invocation) -> int:
    paths = [arg for arg in inv.args if not arg.startswith("-")]
    png = screenshot_png(inv)
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


PROGRAMS = {
    "getprop": getprop, "input": input_, "am": am, "monkey": monkey, "wm": wm,
    "dumpsys": dumpsys, "screencap": screencap, "pm": pm,
}
