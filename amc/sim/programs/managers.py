"""The tools that change what runs: am (start, force-stop, broadcast), monkey, pm and settings.

- `am start -n PKG/ACTIVITY` opens an activity the spec lists. `am start -a
  android.intent.action.VIEW -d URL` opens an http(s) URL in Chrome, whose address bar
  then shows it; anything else cannot be resolved.
- `am broadcast -a ADB_INPUT_B64 --es msg BASE64` (UTF-8), `-a ADB_INPUT_TEXT --es msg
  TEXT` and `-a ADB_CLEAR_TEXT` type into (or clear) the focused field, but only while the
  ADB keyboard is the default input method; otherwise the broadcast completes with no
  receiver, as on a phone without it.
- `pm list packages [-3] [--show-versioncode] [FILTER]` (third-party only: not in
  `spec.SYSTEM_PACKAGES`), `pm clear` (stops the app and forgets its typed text), `pm path`,
  `pm install [-r] [-g] FILE` (reads the APK's manifest: `apk`) and `pm uninstall PKG`.
- `settings get|put|delete|list system|secure|global`: the device's settings table.
  `user_rotation` (with `accelerometer_rotation` 0) turns the screen, and
  `default_input_method` chooses the keyboard.

Exit codes of failures that were never checked on a device are chosen to be plausible
and easy to detect.
"""

from __future__ import annotations

import base64
import binascii

from .. import apk, gestures
from ..invocation import Invocation
from ..pages import URL_BAR
from ..spec import ADB_KEYBOARD, SYSTEM_PACKAGES

VIEW = "android.intent.action.VIEW"
CHROME = "com.android.chrome"
ADB_KEYBOARD_PACKAGE = ADB_KEYBOARD.split("/")[0]


def am(inv: Invocation) -> int:
    args = list(inv.args)
    if not args:
        inv.err("usage: am [subcommand] [options]\n")
        return 1
    command, rest = args[0], args[1:]
    if command == "force-stop":
        if len(rest) != 1:
            inv.err("Error: force-stop needs exactly one package\n")
            return 1
        inv.device.force_stop(rest[0])
        return 0
    if command == "start":
        return _start(inv, _intent(rest))
    if command == "broadcast":
        return _broadcast(inv, _intent(rest))
    inv.err(f"Error: unknown command '{command}'\n")
    return 1


def _intent(args: list[str]) -> dict[str, str]:
    """The options of an intent: -n, -a, -d, -c, -t as given; `--es KEY VALUE` as "extra:KEY"."""
    intent: dict[str, str] = {}
    options = iter(args)
    for option in options:
        if option in ("-n", "-a", "-d", "-c", "-t", "--user"):
            intent[option] = next(options, "")
        elif option == "--es":
            key = next(options, "")
            intent[f"extra:{key}"] = next(options, "")
    return intent


def _start(inv: Invocation, intent: dict[str, str]) -> int:
    device = inv.device
    component = intent.get("-n")
    if component is None and intent.get("-a") == VIEW and "-d" in intent:
        url = intent["-d"]
        inv.out(f"Starting: Intent {{ act={VIEW} dat={url} }}\n")
        chrome = device.resolve(CHROME, None)
        if chrome is None or not url.lower().startswith(("http://", "https://")):
            inv.out(
                f"Error: Activity not started, unable to resolve Intent {{ act={VIEW} dat={url} flg=0x10000000 }}\n"
            )
            return 1
        with device.lock:
            device.ui.app_fields(chrome)[URL_BAR] = url
            device.open_activity(chrome)
        return 0
    if not component or "/" not in component:
        inv.out(
            "Error: am start needs -n PACKAGE/ACTIVITY (or -a android.intent.action.VIEW -d URL) in the simulator\n"
        )
        return 1
    package, activity = component.split("/", 1)
    inv.out(f"Starting: Intent {{ cmp={component} }}\n")
    resolved = device.resolve(package, activity)
    if resolved is None:
        full = package + activity if activity.startswith(".") else activity
        inv.out(f"Error type 3\nError: Activity class {{{package}/{full}}} does not exist.\n")
        return 1
    device.open_activity(resolved)
    return 0


def _broadcast(inv: Invocation, intent: dict[str, str]) -> int:
    action = intent.get("-a", "")
    extras = " (has extras)" if any(key.startswith("extra:") for key in intent) else ""
    inv.out(f"Broadcasting: Intent {{ act={action} flg=0x400000{extras} }}\n")
    if inv.device.ui.input_method == ADB_KEYBOARD:
        if action == "ADB_INPUT_B64":
            try:
                text = base64.b64decode(intent.get("extra:msg", ""), validate=True).decode("utf-8")
            except (binascii.Error, UnicodeDecodeError):
                text = ""
            gestures.type_text(inv.device, text)
        elif action == "ADB_INPUT_TEXT":
            gestures.type_text(inv.device, intent.get("extra:msg", ""))
        elif action == "ADB_CLEAR_TEXT":
            gestures.clear_text(inv.device)
    inv.out("Broadcast completed: result=0\n")
    return 0


def monkey(inv: Invocation) -> int:
    args = list(inv.args)
    package = args[args.index("-p") + 1] if "-p" in args[:-1] else None
    resolved = inv.device.resolve(package, None) if package else None
    if resolved is None:
        inv.out("** No activities found to run, monkey aborted.\n")
        return 1
    inv.device.open_activity(resolved)
    inv.out("  bash arg: " + "\n  bash arg: ".join(args) + "\n")
    inv.out("Events injected: 1\n## Network stats: elapsed time=12ms (0ms mobile, 0ms wifi, 12ms not connected)\n")
    return 0


def installed(inv: Invocation) -> list[str]:
    """Every package on the device: the spec's, the system's, and the ADB keyboard when it is the IME."""
    packages = set(inv.device.spec.packages) | SYSTEM_PACKAGES | set(inv.device.installed)
    if inv.device.ui.input_method == ADB_KEYBOARD:
        packages.add(ADB_KEYBOARD_PACKAGE)
    return sorted(packages)


def pm(inv: Invocation) -> int:
    args = [arg for arg in inv.args if arg]
    packages = installed(inv)
    if args[:2] == ["list", "packages"]:
        options = [arg for arg in args[2:] if arg.startswith("-")]
        third_party, versions = "-3" in options, "--show-versioncode" in options
        contains = next((arg for arg in args[2:] if not arg.startswith("-")), "")
        for package in packages:
            if not (third_party and package in SYSTEM_PACKAGES) and contains in package:
                code = f" versionCode:{inv.device.installed.get(package, 1)}" if versions else ""
                inv.out(f"package:{package}{code}\n")
        return 0
    if args[:1] == ["path"] and len(args) == 2:
        if args[1] not in packages:
            return 1
        inv.out(f"package:/data/app/~~sim/{args[1]}-1/base.apk\n")
        return 0
    if args[:1] == ["clear"] and len(args) == 2:
        if args[1] not in packages:
            inv.out("Failed\n")
            return 1
        inv.device.clear_data(args[1])
        inv.out("Success\n")
        return 0
    if args[:1] == ["install"] and len(args) >= 2:
        return _install(inv, args[1:-1], args[-1])
    if args[:1] == ["uninstall"] and len(args) == 2:
        with inv.device.lock:
            removed = inv.device.installed.pop(args[1], None)
        if removed is None:
            inv.out("Failure [DELETE_FAILED_INTERNAL_ERROR]\n")
            return 1
        inv.device.force_stop(args[1])
        inv.out("Success\n")
        return 0
    inv.err("usage: pm [list packages [-3]|path|clear|install|uninstall] ...\n")
    return 1


def _install(inv: Invocation, flags: list[str], path: str) -> int:
    """`pm install [-r] [-g] FILE`: an APK whose manifest parses, once (or again with `-r`)."""
    data = inv.device.files.get(path)
    if data is None:
        inv.out(f"Error: Can't open file: {path}\n")
        return 1
    inv.out("Performing Streamed Install\n")
    try:
        package, version_code = apk.read(data)
    except apk.BadApk as error:
        inv.out(f"Failure [{error}]\n")
        return 1
    device = inv.device
    with device.lock:
        there = package in device.installed or package in device.spec.packages
        if there and "-r" not in flags:
            inv.out(
                f"Failure [INSTALL_FAILED_ALREADY_EXISTS: Attempt to re-install {package} without first uninstalling.]\n"
            )
            return 1
        device.installed[package] = version_code
    inv.out("Success\n")
    return 0


def settings(inv: Invocation) -> int:
    args = list(inv.args)
    table = inv.device.ui.settings.get(args[1]) if len(args) >= 2 else None
    if table is None or args[0] not in ("get", "put", "delete", "list"):
        inv.err("usage: settings [get|put|delete|list] [system|secure|global] [KEY [VALUE]]\n")
        return 1
    verb, rest = args[0], args[2:]
    if verb == "list" and not rest:
        for key in sorted(table):
            inv.out(f"{key}={table[key]}\n")
    elif verb == "get" and len(rest) == 1:
        inv.out(table.get(rest[0], "null") + "\n")
    elif verb == "put" and len(rest) >= 2:
        with inv.device.lock:
            table[rest[0]] = rest[1]
    elif verb == "delete" and len(rest) == 1:
        inv.out(f"Deleted {1 if table.pop(rest[0], None) is not None else 0} rows\n")
    else:
        inv.err(f"settings {verb}: wrong number of arguments\n")
        return 1
    return 0


PROGRAMS = {"am": am, "monkey": monkey, "pm": pm, "settings": settings}
