"""One simulated device: the state both front ends (smart socket and adbd) share.

A `SimDevice` owns the device's mutable state (what the screen shows, in `ui`: see
`ui_state`; files; connection state; fault flags), its process table, its command log and
its logcat ring. Navigation (`open_activity`, `back`, `home`, `force_stop`, `clear_data`)
lives here because it changes several of those at once and writes the log lines a real
system_server would; `gestures` decides what input does, under `lock`. The front ends
turn requests into `start_shell()` / sync calls and register a "drop" callback for each
live stream, so that `disconnect()` can cut them all the way a pulled cable would.
"""

from __future__ import annotations

import itertools
import re
import threading
import time
from collections.abc import Callable
from typing import Any, TypedDict

from .log import CommandLog
from .logcat import LogcatRing
from .process import Hangup, Killed, OutputSink, SimProcess
from .screens import Screen, screen_of
from .shell import Shell
from .spec import ADB_KEYBOARD, STOCK_KEYBOARD, SimDeviceSpec
from .ui_state import UiState

STATES = ("device", "offline", "unauthorized", "absent")

SYSTEM_SERVER_PID = 1100  # as `ps` lists it
LAUNCH_MILLISECONDS = 250  # the "Displayed ... +Nms" figure: fixed, so runs are reproducible
# The activities of an app installed with `pm install` (the simulator reads no more of an APK).
INSTALLED_ACTIVITIES = (".MainActivity",)

_RELEASE_BY_SDK = {34: "14", 33: "13", 32: "12L", 31: "12", 30: "11", 29: "10", 28: "9"}


def build_properties(spec: SimDeviceSpec) -> dict[str, str]:
    """The `getprop` table of a device built from `spec`."""
    return {
        "ro.product.model": spec.model,
        "ro.product.manufacturer": spec.manufacturer,
        "ro.product.brand": spec.manufacturer.lower(),
        "ro.product.name": spec.product,
        "ro.product.device": spec.product,
        "ro.product.cpu.abi": "arm64-v8a",
        "ro.build.version.sdk": str(spec.sdk),
        "ro.build.version.release": _RELEASE_BY_SDK.get(spec.sdk, str(max(1, spec.sdk - 20))),
        "ro.build.type": "user",
        "ro.debuggable": "0",
        "ro.serialno": spec.serial,
        "ro.sf.lcd_density": "420",
        "sys.boot_completed": "1",
        "persist.sys.timezone": "UTC",
    }


class ProcessState(TypedDict):
    pid: int
    cmdline: str


class DeviceState(TypedDict):
    """What `SimDevice.snapshot` shows of a device (and `host:amc-sim-state` serves as JSON)."""

    serial: str
    state: str
    silent: bool
    model: str
    foreground: str
    back_stack: list[str]
    input_events: list[str]
    typed_text: str
    rotation: int
    input_method: str
    files: list[str]
    processes: list[ProcessState]


class SimDevice:
    """Mutable state, processes and log of one simulated device."""

    def __init__(
        self,
        spec: SimDeviceSpec,
        pids: Callable[[], int] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ):
        self.spec = spec
        self.serial = spec.serial
        self.log = CommandLog(spec.serial)
        self.properties = build_properties(spec)
        self._lock = threading.RLock()
        self.lock = self._lock  # held by `gestures` across a read-modify-write of `ui`
        self._state = spec.state
        self._silent = False
        self._next_pid = pids or itertools.count(4000).__next__
        self._processes: dict[int, SimProcess] = {}
        self._drops: dict[int, Callable[[], None]] = {}
        self._drop_ids = itertools.count(1)
        # Screen-visible state, changed by the `input`, `am`, `pm`, `settings` and `monkey`
        # programs (through `gestures`); `clock` is the screen's time (delayed elements).
        self.ui = UiState(spec, clock)
        self.input_events: list[str] = []
        self.files: dict[str, bytes] = {}
        # Apps installed with `pm install`: package -> version code (each has one activity).
        self.installed: dict[str, int] = {}
        self.logcat = LogcatRing()
        self._app_pids: dict[str, int] = {}
        self.logcat.log("I", "ActivityManager", "System now ready", pid=SYSTEM_SERVER_PID, buffer="system")

    # --- connection state and faults ----------------------------------------------

    @property
    def state(self) -> str:
        """device, offline, unauthorized, or absent (not listed at all)."""
        return self._state

    def set_state(self, state: str) -> None:
        if state not in STATES:
            raise ValueError(f"unknown device state {state!r}")
        with self._lock:
            self._state = state
        if state != "device":
            self._drop_links()

    @property
    def silent(self) -> bool:
        """When true the device accepts the transport but never answers a service request."""
        return self._silent

    def set_silent(self, silent: bool = True) -> None:
        self._silent = silent

    def disconnect(self, state: str = "offline") -> None:
        """Cut every live stream now (partial output, then EOF) and leave the device in `state`."""
        self.set_state(state)
        self._drop_links()

    def add_link(self, drop: Callable[[], None]) -> int:
        """Register how to cut one live front-end stream; returns a handle for remove_link."""
        with self._lock:
            handle = next(self._drop_ids)
            self._drops[handle] = drop
            return handle

    def remove_link(self, handle: int) -> None:
        with self._lock:
            self._drops.pop(handle, None)

    def _drop_links(self) -> None:
        with self._lock:
            drops = list(self._drops.values())
            self._drops.clear()
        for drop in drops:
            drop()

    # --- screen and navigation ----------------------------------------------------

    @property
    def foreground(self) -> str:
        """The foreground "package/activity" (the home screen's when the task stack is empty)."""
        with self._lock:
            return self.ui.foreground

    @property
    def back_stack(self) -> list[str]:
        """What BACK returns to, newest last."""
        with self._lock:
            return [activity.component for activity in self.ui.task[:-1]]

    @property
    def typed_text(self) -> str:
        """The focused field's text; with no field focused, what was typed into nothing."""
        with self._lock:
            return self.ui.typed_text

    def app_fields(self, component: str) -> dict[str, str]:
        """The text fields' contents of `component`'s app, by resource id (its app data)."""
        with self._lock:
            return self.ui.app_fields(component)

    def screen(self) -> Screen:
        """What the screen shows now (its UI tree; see `screens`)."""
        with self._lock:
            state = self.ui.view()
        return screen_of(self.spec, state)

    def open_activity(self, component: str) -> None:
        """Bring `component` ("package/activity", known to the spec) to the front, as `am start` does."""
        package = component.split("/")[0]
        system: dict[str, Any] = {"pid": SYSTEM_SERVER_PID, "buffer": "system"}
        with self._lock:
            self.logcat.log("I", "ActivityTaskManager", f"START u0 {{cmp={component}}} from uid 2000", **system)
            if package not in self._app_pids:
                pid = self._app_pids[package] = self._next_pid()
                self.logcat.log(
                    "I",
                    "ActivityManager",
                    f"Start proc {pid}:{package}/{self._app_uid(package)} for activity {{{component}}}",
                    **system,
                )
            self.ui.push(component)
            self.logcat.log("I", "ActivityTaskManager", f"Displayed {component}: +{LAUNCH_MILLISECONDS}ms", **system)

    def show_recents(self) -> None:
        """APP_SWITCH: the Recents screen over the task stack."""
        with self._lock:
            self.ui.show_recents()

    def back(self) -> None:
        """The BACK key: close an open menu, else return to the previous activity or home."""
        with self._lock:
            self.ui.back()

    def home(self) -> None:
        with self._lock:
            self.ui.task.clear()

    def force_stop(self, package: str) -> None:
        """`am force-stop`: its activities leave the screen and the back stack, its process ends."""
        with self._lock:
            pid = self._app_pids.pop(package, None)
            if pid is not None:
                self.logcat.log(
                    "I",
                    "ActivityManager",
                    f"Killing {pid}:{package}/{self._app_uid(package)} (adj 0): stop {package} due to from pid 0",
                    pid=SYSTEM_SERVER_PID,
                    buffer="system",
                )
            self.ui.close_package(package)

    def clear_data(self, package: str) -> None:
        """`pm clear`: stop the app and forget its data (the text typed into its fields)."""
        with self._lock:
            self.force_stop(package)
            self.ui.fields.pop(package, None)

    def set_broadcast_ime(self, on: bool) -> None:
        """Install the ADB keyboard and make it the input method (on), or go back to the stock one."""
        with self._lock:
            self.ui.settings["secure"]["default_input_method"] = ADB_KEYBOARD if on else STOCK_KEYBOARD

    def resolve(self, package: str, activity: str | None) -> str | None:
        """Return "package/activity" if the device has it (the launcher activity when None)."""
        activities = self.spec.packages.get(package) or (INSTALLED_ACTIVITIES if package in self.installed else ())
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

    def _app_uid(self, package: str) -> str:
        """An app's user id as the system writes it (u0a<N>): stable per package."""
        packages = sorted(self.spec.packages)
        index = packages.index(package) if package in packages else len(packages)
        return f"u0a{100 + index}"

    # --- processes ----------------------------------------------------------------

    def start_shell(self, command: str, sink: OutputSink, *, via: str) -> SimProcess:
        """Start `command` as a new process writing to `sink`; returns at once."""
        with self._lock:
            pid = self._next_pid()
            process = SimProcess(pid, command, sink, keep_silent_orphans=self.spec.keep_silent_orphans)
            self._processes[pid] = process
        seq = self.log.begin(service="shell", command=command, via=via, pid=pid)
        thread = threading.Thread(
            target=self._run, args=(process, seq), daemon=True, name=f"sim-{self.serial}-pid{pid}"
        )
        thread.start()
        return process

    def _run(self, process: SimProcess, seq: int) -> None:
        end, status, signal = "completed", None, None
        try:
            status = Shell(self, process).run(process.cmdline)
        except Hangup as hangup:
            end, signal = "interrupted", hangup.signal
        except Killed as killed:
            end, signal = "killed", killed.signal
        except Exception as error:  # a simulator bug: fail like a crashing program would
            status = 134
            try:
                process.write(f"amc-sim: internal error: {error!r}\n".encode())
            except (Hangup, Killed):
                pass
        finally:
            # The log is final before the client sees EOF, so a test that reads it
            # right after a call returns sees how the command ended.
            self.log.add_output(seq, process.bytes_written)
            self.log.finish(seq, end=end, exit_status=status, signal=signal)
            with self._lock:
                self._processes.pop(process.pid, None)
            process.sink.close()
            process.done.set()

    def processes(self) -> list[SimProcess]:
        with self._lock:
            return list(self._processes.values())

    def find_processes(self, pattern: str, *, full: bool, exclude: int | None = None) -> list[SimProcess]:
        """Processes whose command line (`full`) or name matches the regex `pattern`."""
        regex = re.compile(pattern)
        found = []
        for process in self.processes():
            if process.pid == exclude:
                continue
            name = process.cmdline.split(maxsplit=1)[0].rsplit("/", 1)[-1] if process.cmdline.strip() else ""
            if regex.search(process.cmdline if full else name):
                found.append(process)
        return found

    def kill_all(self, signal: str = "SIGKILL", wait: float = 1.0) -> None:
        """Kill every process (used at shutdown) and wait a little for them to end."""
        processes = self.processes()
        for process in processes:
            process.kill(signal)
        for process in processes:
            process.done.wait(wait)

    # --- snapshots ----------------------------------------------------------------

    def snapshot(self) -> DeviceState:
        """The observable state as JSON-ready data (served by `host:amc-sim-state`)."""
        with self._lock:
            return {
                "serial": self.serial,
                "state": self._state,
                "silent": self._silent,
                "model": self.spec.model,
                "foreground": self.foreground,
                "back_stack": list(self.back_stack),
                "input_events": list(self.input_events),
                "typed_text": self.typed_text,
                "rotation": self.ui.rotation,
                "input_method": self.ui.input_method,
                "files": sorted(self.files),
                "processes": [{"pid": p.pid, "cmdline": p.cmdline} for p in self._processes.values()],
            }
