"""The attempt's screen recording (specs/protocol.md, "Screen recording"): `record` start and
stop, and the stop the attempt's end makes.

`screenrecord` stops by itself after 180 s (its most), so a recording is a chain of
segments: a thread of its own holds one long-lived shell stream per segment,

    screenrecord --time-limit 180 /sdcard/amc-rec-<token>-<n>.mp4

and starts segment n+1 when segment n's stream ends, until the recording is stopped. The
steps run meanwhile on their own connections; the thread never blocks one.

Stopping sends `pkill -INT -f 'amc-re[c]-<token>'` (the `[c]` keeps pkill from matching its
own shell, as for supervised commands): SIGINT makes screenrecord finish the file, so it
plays. Then each segment is pulled over sync into the artifacts directory and removed from
the device. A stop cut short (interrupted, a failed pull) leaves the segments known, so the
attempt's end (`AdbExecutor.finish_recording`) can still fetch them.
"""

from __future__ import annotations

import logging
import threading
import time
from pathlib import Path
from typing import Any

import attrs

from . import commands as build
from ._ppadb import Device
from .calls import ActionResult, Call, Memory, as_json
from .client import call, run_stream
from .errors import AdbError, StepFailed
from .guard import Stopper

log = logging.getLogger("amc.adapters.adb.recording")

SEGMENT_SECONDS = 180  # screenrecord's own limit
RECORDING_DIR = "/sdcard"
MP4 = "video/mp4"
# A segment that ends sooner than this, unasked, is screenrecord failing, not a 3-minute segment
# ending: the chain stops rather than spin.
_SHORTEST_SEGMENT = 1.0


def segment_path(token: str, number: int) -> str:
    return f"{RECORDING_DIR}/amc-rec-{token}-{number}.mp4"


def kill_recording(token: str) -> str:
    return f"pkill -INT -f 'amc-re[c]-{token}'"


class Recording:
    """One running recording on one device: its chain of segments, in a thread."""

    def __init__(self, device: Device):
        self._device = device
        self.token = build.new_token()
        self.segments: list[str] = []  # device paths, in recording order
        self.error: str | None = None  # why the chain stopped by itself
        self._stopping = threading.Event()
        self._stream: Stopper | None = None
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._chain, daemon=True, name=f"amc-rec-{self.token}")
        self._thread.start()

    @property
    def running(self) -> bool:
        return self._thread.is_alive()

    def end(self, device_call: Stopper, timeout: float) -> None:
        """Stop screenrecord on the device (SIGINT) and wait until its file is finished, at
        most `timeout` s; after that the stream is cut (a hangup also finishes the file)."""
        self._stopping.set()
        payload = kill_recording(self.token)
        with device_call.active():
            device_call.set_deadline(timeout)
            try:
                run_stream(self._device, payload, device_call)
            except AdbError as error:
                log.warning("recording %s: could not stop screenrecord: %s", self.token, error.reason)
        self._thread.join(timeout)
        if self._thread.is_alive():
            with self._lock:
                stream = self._stream
            if stream is not None:
                stream.trip("recording stopped")
            self._thread.join(timeout)

    def abandon(self) -> None:
        """Stop the chain without waiting or fetching (an attempt torn down): its stream is
        cut, which ends screenrecord on the device, and no further segment starts."""
        self._stopping.set()
        with self._lock:
            stream = self._stream
        if stream is not None:
            stream.trip("recording abandoned")

    def _chain(self) -> None:
        number = 0
        while not self._stopping.is_set():
            number += 1
            path = segment_path(self.token, number)
            stream = Stopper()
            with self._lock:
                self._stream = stream
                self.segments.append(path)
            began = time.monotonic()
            try:
                with stream.active():
                    output = run_stream(self._device, f"screenrecord --time-limit {SEGMENT_SECONDS} {path}", stream)
            except AdbError as error:
                self.error = f"screenrecord: {error.reason}"
                return
            text = bytes(output.data).decode("utf-8", "replace").strip()
            if not self._stopping.is_set() and (text or time.monotonic() - began < _SHORTEST_SEGMENT):
                self.error = f"screenrecord ended after {time.monotonic() - began:.1f} s: {text or 'no output'}"
                return


def pull(device: Device, stopper: Stopper, source: str, target: Path) -> None:
    """Copy a device file to `target` over sync; StepFailed if it cannot be read."""
    target.parent.mkdir(parents=True, exist_ok=True)
    failure = call(stopper, lambda: device.pull(source, str(target)))  # ppadb returns the FAIL text
    if stopper.tripped:
        target.unlink(missing_ok=True)  # cut short: never taken for a whole segment later
        return
    if failure:
        target.unlink(missing_ok=True)
        raise StepFailed(f"could not pull {source}: {failure}")


def start(device: Device, memory: Memory, stopper: Stopper) -> None:
    """Begin the attempt's recording (StepFailed if one runs), and return once screenrecord
    runs on the device: a stop that came sooner would find nothing to signal, and the segment
    would only end, unfinished, when its stream was cut."""
    if memory.recording is not None:
        raise StepFailed("already recording: stop the recording first")
    recording = Recording(device)
    probe = f"pgrep -f 'amc-re[c]-{recording.token}'"
    while not stopper.tripped:
        if not recording.running:
            raise StepFailed(recording.error or "screenrecord ended as soon as it started")
        if bytes(run_stream(device, probe, stopper).data).strip():
            memory.recording = recording
            return
        time.sleep(0.02)
    recording.abandon()


def stop(device: Device, memory: Memory, directory: Path, stopper: Stopper, timeout: float) -> Stopped:
    """Stop the attempt's recording and pull its segments under `stopper` (already active).

    StepFailed if nothing records, or if no segment could be fetched. If `stopper` trips, the
    recording stays known (the attempt's end fetches it) and the caller raises.
    """
    recording = memory.recording
    if recording is None:
        raise StepFailed("not recording: start a recording first")
    recording.end(Stopper(), timeout)  # a stopper of its own: the SIGINT must go through
    files: list[Path] = []
    missing: list[str] = []
    for number, source in enumerate(recording.segments, 1):
        target = directory / f"amc-rec-{recording.token}-{number}.mp4"
        try:
            if not target.exists():
                pull(device, stopper, source, target)
        except StepFailed as error:
            missing.append(error.reason)
            continue
        if stopper.tripped:
            return Stopped(tuple(files), tuple(missing))
        files.append(target)
    run_stream(device, "rm -f " + " ".join(recording.segments), stopper)
    memory.recording = None
    if not files:
        raise StepFailed("; ".join(filter(None, [recording.error, *missing])) or "the recording produced no file")
    return Stopped(tuple(files), tuple(missing))


@attrs.frozen
class Stopped:
    """The segments fetched (local files, in order) and what could not be."""

    files: tuple[Path, ...]
    missing: tuple[str, ...] = ()


def record(call: Call, args: dict[str, Any]) -> ActionResult:
    """The `record` action: `mode` start or stop."""
    mode = args.get("mode")
    if mode == "start":
        call.set_deadline(call.limits.command_timeout)
        start(call.device, call.memory, call.stopper)
        if call.stopper.tripped:
            call.stopped("starting the recording", b"")
        return call.result("record", output=as_json({"recording": "started"}))
    if mode != "stop":
        raise StepFailed(f"mode must be start or stop, got {mode!r}")
    # Stopping waits for the file's finish (at most twice the command timeout), then pulls.
    call.set_deadline(3 * call.limits.command_timeout)
    stopped = stop(call.device, call.memory, call.artifacts_dir, call.stopper, call.limits.command_timeout)
    if call.stopper.tripped:
        call.stopped("stopping the recording", b"")
    output: dict[str, Any] = {"recording": "stopped", "segments": len(stopped.files)}
    if stopped.missing:
        output["missing"] = list(stopped.missing)
    return call.result(
        "record",
        output=as_json(output),
        artifact=stopped.files[0],
        more_artifacts=stopped.files[1:],
        content_type=MP4,
    )
