"""Protocol-level Android device simulator, for testing ADB clients without phones.

Theory of operation
-------------------
One `SimDevice` per device holds everything that is true about it (identity, screen,
foreground app, typed text, files, connection state, processes) and records every
command it receives in a `CommandLog`. Two front ends translate wire protocols into calls
on it, so the same device answers both:

- `smart_socket`: the adb *server* protocol on one port. `ppadb.client.Client(host,
  Simulator.server_port)` talks to it directly, with the real server's replies and FAIL
  texts (specs/adb.md §1, §2).
- `adbd`: the device transport protocol on one port per device, so the real `adb`
  server can `adb connect 127.0.0.1:<Simulator.device_ports[serial]>` (specs/adb.md §3).

A `shell:` or `exec:` request starts a `SimProcess` in its own thread (`exec:` is the same
raw, binary-safe stream; the simulator has no pty either way); `shell` interprets the
command line (a small POSIX sh subset) and `programs` implements the tools (getprop,
input, am, monkey, pm, settings, wm, dumpsys, screencap, uiautomator, logcat, sleep,
timeout, kill/pkill, ...). Programs see time and output only through the process, which
is where stream closes and kills land (see `process` for the exact model of specs/adb.md §7).

Screens (`screens`, whose docstring tours the pages): the foreground activity has a small
UI tree (a title bar and rows with text, resource-id, class, flags and bounds), a pure
function of the device's state (`pages`, `layout`):
- `uiautomator dump [FILE]` writes it as one line of XML to FILE (default
  /sdcard/window_dump.xml; /dev/tty and /dev/stdout go to the output), then prints
  "UI hierchary dumped to: FILE", spelled as the real tool spells it; `cat` and sync pull
  read the file. `<hierarchy rotation="N">` follows `settings put system user_rotation N`
  (with accelerometer_rotation 0); landscape swaps width and height.
- `screencap -p` writes a PNG and `screencap` (e.g. over `exec:screencap`) the raw frame:
  a `<IIII` header (width, height, 1 = RGBA_8888, colorspace; 12 bytes without the
  colorspace below sdk 28), then RGBA. Both draw every element's outline and text with
  Pillow's default font (`drawing`), cached per screen.
- `screenrecord [--time-limit N] FILE` (`programs.recording`, `video`) encodes the frames it
  draws, 4 a second, as an H.264 mp4 with the ffmpeg that imageio-ffmpeg bundles; SIGINT,
  SIGTERM, a hangup or the time limit (at most 180 s) finish the file, which then appears in
  the device's files (sync pull reads it); SIGKILL leaves none.
- `input` (`gestures`): a tap on a row that opens a page opens it; an EditText takes the
  focus and `input text` types into it; two taps at one point within 500 ms are a double
  tap; `input swipe X Y X Y MS` of 500 ms or more is a long press; other swipes scroll a
  list by whole rows; `input keyevent` takes several keys (BACK, HOME, APP_SWITCH, DEL,
  MOVE_END, ENTER, ...). The example app (com.example.app) has a login form, a greeting
  that appears 1 s after its page opened, a 40-row catalogue, a slow page and a gestures
  page; times are read from the devices' clock (`Simulator(clock=...)`).
- `am start -n` / `-a android.intent.action.VIEW -d URL` (Chrome shows the URL),
  `am force-stop`, `pm clear` (also forgets the app's typed text), `pm list packages [-3]`,
  `settings get|put`, and the ADB keyboard's broadcasts (`ADB_INPUT_B64`,
  `ADB_CLEAR_TEXT`), which type only while it is the input method (`settings get secure
  default_input_method`): off by default, on with `SimDeviceSpec(broadcast_ime=True)`,
  `Simulator.set_broadcast_ime()` or the control service below.

Logcat (`logcat`): a ring of the newest 2000 entries. Launches (`am start`, `monkey`, a
tap that opens a page) append `ActivityTaskManager: START u0 {cmp=...}`, for a package
not yet running `ActivityManager: Start proc PID:PACKAGE/u0aN for activity {...}`, then
`Displayed ...`; every `input` event appends `Input: injectInputEvent: <event>`.
`logcat -d` prints it in threadtime format (`-v` brief, time, tag, process, raw also
work), `-t N` the last N lines, `-c` clears it, and without `-d`/`-t` it follows.

Test programs: `amc-sim-ticker SECONDS [INTERVAL]` prints `tick N` every 0.1 s;
`amc-sim-bytes HEX...` writes raw bytes (e.g. invalid UTF-8).

Faults: `Simulator.set_state(serial, "offline" | "unauthorized" | "absent" | "device")`,
`set_silent(serial)` (transport accepted, service never answered), `disconnect(serial)`
(live streams cut mid-command), and `SimDeviceSpec(keep_silent_orphans=True)`.

Out of process: the server port also answers `host:amc-sim-log:<serial>` (OKAY, then a
JSON list of `CommandRecord` dicts until EOF), `host:amc-sim-state:<serial>` and
`host:amc-sim-fault:<serial>:<json>` (faults and `{"broadcast_ime": bool}`);
`remote.fetch_log()` and friends wrap them, and
`amc sim` runs a simulator in the foreground.
"""

from .device import SimDevice
from .log import CommandRecord
from .remote import SimulatorError, fetch_log, fetch_state, inject_fault
from .simulator import Simulator
from .spec import SimDeviceSpec, default_specs

__all__ = [
    "CommandRecord",
    "SimDeviceSpec",
    "SimDevice",
    "Simulator",
    "SimulatorError",
    "default_specs",
    "fetch_log",
    "fetch_state",
    "inject_fault",
]
