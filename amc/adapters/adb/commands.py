"""The exact shell command strings the executor sends, built without any IO.

Quoting matters twice: adbd hands the payload to `/system/bin/sh -c`, and some tools
then re-interpret their argument (`input text` turns `%s` into a space, specs/adb.md §6).
Every user-supplied value is validated or passed through `shlex.quote`.

A `shell` step is *supervised*: it runs as

    sh -c '<command>' amc-step-<token>; echo amc-exit-<token>:$?

so that (1) the exit status, which raw `shell:` does not carry, arrives as a marker at
the end of the output; a missing marker means the stream ended early (device gone,
specs/adb.md §1.6.3); and (2) the command line carries a unique tag, so a second shell call
`pkill -f 'amc-ste[p]-<token>'` can stop it after a deadline or an interrupt (§7). The
`[p]` keeps pkill's own shell from matching itself. Caveat on real devices: a grandchild
that the wrapper's shell forked keeps its own command line and may survive the pkill.
"""

from __future__ import annotations

import base64
import re
import secrets
import shlex

from .errors import StepFailed

_PACKAGE = re.compile(r"^[A-Za-z][A-Za-z0-9_]*(\.[A-Za-z0-9_]+)+$")
_ACTIVITY = re.compile(r"^\.?[A-Za-z_][A-Za-z0-9_$]*(\.[A-Za-z_][A-Za-z0-9_$]*)*$")
_KEY_NAME = re.compile(r"^(KEYCODE_)?[A-Z0-9_]+$")
_MARKER = re.compile(rb"amc-exit-(?P<token>[0-9a-f]+):(?P<status>\d+)\n?$")

LAUNCHER_CATEGORY = "android.intent.category.LAUNCHER"
# Where a UI dump is written on the device: /data/local/tmp is writable by the shell user on
# every device, with no storage permission involved (specs/adb.md §6).
UI_DUMP_DIR = "/data/local/tmp"
MAX_LOGCAT_LINES = 10_000
# The raw frame service: `screencap` without -p writes a header and the pixels, and `exec:`
# (unlike `shell:`) never passes binary output through a pty.
RAW_SCREENCAP = "exec:screencap"
# The ADB keyboard (github.com/senzhk/ADBKeyBoard), the broadcast IME that types any text.
ADB_KEYBOARD = "com.android.adbkeyboard/.AdbIME"
INPUT_METHOD = "settings get secure default_input_method"
KEYCODES = {"back": "KEYCODE_BACK", "home": "KEYCODE_HOME", "enter": "KEYCODE_ENTER"}
ORIENTATIONS = {"portrait": 0, "landscape": 1}
_URL = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:\S+$")
MAX_URL = 8192


def new_token() -> str:
    return secrets.token_hex(6)


def supervised(command: str, token: str) -> str:
    """The payload that runs `command` with an exit marker and a kill tag."""
    return f"sh -c {shlex.quote(command)} amc-step-{token}; echo amc-exit-{token}:$?"


def kill_supervised(token: str) -> str:
    """The second shell call that stops a supervised command on the device."""
    return f"pkill -f 'amc-ste[p]-{token}'"


def split_exit_marker(output: bytes, token: str) -> tuple[bytes, int | None]:
    """Return (output without the marker, exit status), or (output, None) if it is missing."""
    match = _MARKER.search(output)
    if match is None or match.group("token").decode() != token:
        return output, None
    return output[: match.start()], int(match.group("status"))


def _integer(name: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value != int(value) or value < 0:
        raise StepFailed(f"{name} must be a non-negative integer, got {value!r}")
    return int(value)


def tap(x: object, y: object) -> str:
    return f"input tap {_integer('x', x)} {_integer('y', y)}"


def swipe(x1: object, y1: object, x2: object, y2: object, duration_ms: object = None) -> str:
    points = " ".join(str(_integer(name, value)) for name, value in (("x1", x1), ("y1", y1), ("x2", x2), ("y2", y2)))
    if duration_ms is None:
        return f"input swipe {points}"
    return f"input swipe {points} {_integer('duration_ms', duration_ms)}"


def double_tap(x: int, y: int) -> str:
    """Two taps in one shell command, so they land close enough in time to count as one gesture."""
    single = tap(x, y)
    return f"{single}; {single}"


def long_press(x: int, y: int, duration_ms: int) -> str:
    """A swipe that does not move is a press held for `duration_ms`."""
    return swipe(x, y, x, y, duration_ms)


def keyevent(key: object) -> str:
    """`key` is a keycode number or a name such as HOME or KEYCODE_HOME."""
    if isinstance(key, int) and not isinstance(key, bool):
        return f"input keyevent {_integer('key', key)}"
    if isinstance(key, str) and key.isdigit():
        return f"input keyevent {int(key)}"
    if isinstance(key, str) and _KEY_NAME.match(key.upper()):
        name = key.upper()
        return f"input keyevent {name if name.startswith('KEYCODE_') else 'KEYCODE_' + name}"
    raise StepFailed(f"key must be a keycode number or name, got {key!r}")


def text(value: str) -> list[str]:
    """The `input text` commands that type `value` exactly.

    `input text` takes one argument and turns `%s` into a space, so spaces are sent as
    `%s` and the argument is shell-quoted. A literal `%s` in `value` cannot be sent in one
    call, so the text is split between the `%` and the `s`. Only printable ASCII can be
    typed through the virtual keyboard.
    """
    if not isinstance(value, str):
        raise StepFailed(f"text must be a string, got {type(value).__name__}")
    bad = sorted({char for char in value if not (" " <= char <= "~")})
    if bad:
        raise StepFailed(f"input text can only type printable ASCII; cannot type {''.join(bad)!r}")
    pieces = value.split("%s")
    chunks = [pieces[0]]
    for piece in pieces[1:]:
        chunks[-1] += "%"
        chunks.append("s" + piece)
    return [f"input text {shlex.quote(chunk.replace(' ', '%s'))}" for chunk in chunks if chunk]


def printable_ascii(value: str) -> bool:
    """What `input text` can type exactly (see `text`)."""
    return all(" " <= char <= "~" for char in value)


def keyevents(*keys: str) -> str:
    """Several key codes (names) in one `input keyevent` command."""
    return "input keyevent " + " ".join(keys)


def clear_by_keys(length: int) -> str:
    """Delete a field's `length` characters: to its end, then that many backspaces."""
    return keyevents("KEYCODE_MOVE_END", *["KEYCODE_DEL"] * length)


def ime_text(value: str) -> str:
    """Type `value` (any Unicode) through the ADB keyboard: UTF-8, base64 (shell-safe)."""
    encoded = base64.b64encode(value.encode("utf-8")).decode("ascii")
    return f"am broadcast -a ADB_INPUT_B64 --es msg {encoded}"


def ime_clear() -> str:
    """Clear the focused field through the ADB keyboard."""
    return "am broadcast -a ADB_CLEAR_TEXT"


def package_name(package: object) -> str:
    if not isinstance(package, str) or not _PACKAGE.match(package):
        raise StepFailed(f"not a package name: {package!r}")
    return package


def stop_app(package: object) -> str:
    return f"am force-stop {package_name(package)}"


def clear_app_data(package: object) -> str:
    """Prints `Success` once the package's data is gone."""
    return f"pm clear {package_name(package)}"


def open_url(url: object) -> str:
    """A VIEW intent for `url`, whichever app handles its scheme."""
    if not isinstance(url, str) or len(url) > MAX_URL or not _URL.match(url):
        raise StepFailed(f"url must be a URL with a scheme (e.g. https://...) of at most {MAX_URL} characters")
    return f"am start -a android.intent.action.VIEW -d {shlex.quote(url)}"


def set_orientation(orientation: object) -> str:
    """Turn auto-rotation off, then fix the rotation (0 portrait, 1 landscape)."""
    if orientation not in ORIENTATIONS:
        raise StepFailed(f"orientation must be one of {', '.join(ORIENTATIONS)}, got {orientation!r}")
    rotation = ORIENTATIONS[str(orientation)]
    return f"settings put system accelerometer_rotation 0 && settings put system user_rotation {rotation}"


def list_packages(third_party: bool) -> str:
    """`package:NAME` lines; `-3` lists only third-party packages."""
    return "pm list packages -3" if third_party else "pm list packages"


def parse_packages(output: str) -> list[str]:
    return sorted({line[len("package:") :].strip() for line in output.splitlines() if line.startswith("package:")})


def launch(package: str, activity: str | None = None) -> str:
    """`am start -n` when the activity is known, else the launcher intent through monkey."""
    if not isinstance(package, str) or not _PACKAGE.match(package):
        raise StepFailed(f"not a package name: {package!r}")
    if activity is None:
        return f"monkey -p {package} -c {LAUNCHER_CATEGORY} 1"
    if not isinstance(activity, str) or not _ACTIVITY.match(activity):
        raise StepFailed(f"not an activity name: {activity!r}")
    return f"am start -n {shlex.quote(f'{package}/{activity}')}"


def ui_dump_path(token: str) -> str:
    """The device file one `ui_dump` writes and then reads back (unique per action)."""
    return f"{UI_DUMP_DIR}/amc-ui-{token}.xml"


def ui_dump(path: str) -> str:
    """Write the screen's UI hierarchy to `path`, print it after the tool's confirmation, and
    delete the file, in one round trip; each part runs only if the one before succeeded."""
    return f"uiautomator dump {path} && cat {path} && rm -f {path}"


def logcat(lines: object) -> str:
    """Print the last `lines` lines of the device log and exit, in threadtime format."""
    count = _integer("lines", lines)
    if not 1 <= count <= MAX_LOGCAT_LINES:
        raise StepFailed(f"lines must be in 1..{MAX_LOGCAT_LINES}, got {lines!r}")
    return f"logcat -d -v threadtime -t {count}"


# -- apps and files: install, uninstall (specs/protocol.md Part F) ---------------------------

PACKAGE_NAME = _PACKAGE
INSTALL_DIR = "/data/local/tmp"


def installed_versions(package: str) -> str:
    """`package:NAME versionCode:N` lines of the packages whose name contains `package`."""
    return f"pm list packages --show-versioncode {package_name(package)}"


def parse_version(output: str, package: str) -> int | None:
    """The version code of exactly `package` in `installed_versions`' output, if installed."""
    for line in output.splitlines():
        name, _, rest = line.removeprefix("package:").strip().partition(" ")
        if line.startswith("package:") and name == package:
            code = rest.strip().removeprefix("versionCode:")
            return int(code) if code.isdigit() else None
    return None


def install_path(token: str) -> str:
    """Where an APK waits on the device while `pm install` reads it (unique per action)."""
    return f"{INSTALL_DIR}/amc-install-{token}.apk"


def install(path: str, *, replace: bool, grant_permissions: bool) -> str:
    """Install the APK at `path` and remove the file whatever happened; prints `Success` or
    `Failure [REASON]`."""
    flags = "".join(flag for flag, on in (("-r ", replace), ("-g ", grant_permissions)) if on)
    return f"pm install {flags}{shlex.quote(path)}; rm -f {shlex.quote(path)}"


def uninstall(package: object) -> str:
    """Prints `Success`, or `Failure [...]` when the package is not installed."""
    return f"pm uninstall {package_name(package)}"
