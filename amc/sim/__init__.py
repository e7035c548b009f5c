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

A `shell:` request starts a `SimProcess` in its own thread; `shell` interprets the
command line (a small POSIX sh subset) and `programs` implements the tools (getprop,
input, am, monkey, wm, dumpsys, screencap, uiautomator, logcat, sleep, timeout,
kill/pkill, ...). Programs see time and output only through the process, which is where
stream closes and kills land (see `process` for the exact model of specs/adb.md §7).

Screens (`screens`): the foreground activity has a small UI tree (a title bar and rows
with text, resource-id, class and bounds), a pure function of the device's state:
- `uiautomator dump [FILE]` writes it as one line of XML to FILE (default
  /sdcard/window_dump.xml; /dev/tty and /dev/stdout go to the output), then prints
  "UI hierchary dumped to: FILE", spelled as the real tool spells it; `cat` and sync pull
  read the file.
- `screencap -p` draws the same rows: equal states give equal PNGs, and a different
  activity, row text or typed text gives a different one.
- `input tap X Y` on a row that opens a page opens it: on the home screen each row
  launches an app; in Settings, "Network & internet" and "Display" open
  `.Settings$NetworkDashboardActivity` and `.Settings$DisplaySettingsActivity`; in
  com.example.app, "Details" opens `.DetailActivity`. BACK returns along the back stack,
  HOME clears it. Taps elsewhere change nothing.

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
`host:amc-sim-fault:<serial>:<json>`; `remote.fetch_log()` and friends wrap them, and
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
