"""ppadb with deadlines: a client whose connections obey the current Stopper, a shell
reader that owns its stream, and the translation of ppadb's errors into ours.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import TypeVar

import attrs

from ._ppadb import Client, Connection, Device
from .errors import AdbError, DeviceUnavailable, StepFailed
from .guard import Stopper, current_stopper

DEFAULT_IO_TIMEOUT = 10.0
MAX_OUTPUT_BYTES = 1 << 20

T = TypeVar("T")

_FAIL = re.compile(r"^ERROR: 'FAIL' [0-9a-fA-F]{4}(.*)$", re.DOTALL)
_GONE = ("not found", "offline", "unauthorized", "no devices", "closed")


# ppadb ships neither type hints nor stubs, so its Client is Any to mypy; this subclass is where
# the agent's typed code meets it.
class BoundedClient(Client):  # type: ignore[misc]
    """A ppadb Client whose every connection has an idle timeout and is tracked by the
    thread's current Stopper (see `guard`), so no call can hang an agent forever."""

    def __init__(self, host: str = "127.0.0.1", port: int = 5037, *, io_timeout: float = DEFAULT_IO_TIMEOUT):
        super().__init__(host, port)
        self.io_timeout = io_timeout

    def create_connection(self, timeout: float | None = None) -> Connection:
        conn = Connection(self.host, self.port, timeout or self.io_timeout)
        conn.connect()
        stopper = current_stopper()
        if stopper is not None:
            stopper.track(conn.socket)
        return conn


def translate(error: BaseException) -> AdbError:
    """Map an exception out of ppadb to DeviceUnavailable or StepFailed."""
    if isinstance(error, AdbError):
        return error
    text = str(error)
    match = _FAIL.match(text)
    if match:
        message = match.group(1).strip()
        kind = DeviceUnavailable if any(word in message for word in _GONE) else StepFailed
        return kind(f"adb: {message}")
    if isinstance(error, RuntimeError) and text.startswith("ERROR: connecting to"):
        return DeviceUnavailable(f"adb server unreachable: {text.splitlines()[0]}")
    if isinstance(error, TimeoutError):
        return DeviceUnavailable("adb did not answer in time (device or server not responding)")
    if isinstance(error, (OSError, RuntimeError)):
        return DeviceUnavailable(f"connection to adb lost: {text or type(error).__name__}")
    return StepFailed(f"{type(error).__name__}: {text}")


def call(stopper: Stopper, function: Callable[[], T]) -> T | None:
    """Run a ppadb call under `stopper` (already active); translate its errors.

    If the stopper trips, the exception ppadb raised is meaningless (we cut its socket),
    so it is swallowed and None returned: the caller checks `stopper.reason`.
    """
    try:
        return function()
    except Exception as error:
        if stopper.tripped:
            return None
        raise translate(error) from error


@attrs.define
class StreamOutput:
    """What a shell stream delivered before it ended."""

    data: bytearray = attrs.field(factory=bytearray)
    opened: bool = False  # the device accepted the service: the command started
    truncated: bool = False


def run_stream(device: Device, payload: str, stopper: Stopper, *, max_bytes: int = MAX_OUTPUT_BYTES) -> StreamOutput:
    """Run `shell:<payload>` and read it to EOF (or until `stopper` trips).

    Silence is legitimate here (a command may print nothing for minutes), so the idle
    timeout is lifted once the stream is open: only the stopper's deadline bounds it.
    Past `max_bytes` the oldest bytes are dropped: the newest carry the completion marker.
    """
    output = StreamOutput()
    handler = _reader(output, stopper, max_bytes)
    call(stopper, lambda: device.shell(payload, handler=handler))
    return output


@attrs.frozen
class ServiceOutput:
    """What a binary service delivered: its bytes, whether it opened, whether it was cut."""

    data: bytes
    opened: bool
    truncated: bool


def run_service(device: Device, service: str, stopper: Stopper, *, max_bytes: int) -> ServiceOutput:
    """Open a device service such as `exec:screencap` and read its binary output to EOF.

    Unlike `run_stream`, the first `max_bytes` are kept and reading stops there (`truncated`):
    a frame cut short is useless, so the caller fails rather than keep its tail. The chunks
    are joined once at the end: a raw frame is megabytes, and every copy shows.
    """
    chunks: list[bytes] = []
    state = {"opened": False, "truncated": False}

    def open_and_read() -> None:
        conn = device.create_connection()
        try:
            conn.send(service)
            state["opened"] = True
            conn.socket.settimeout(None)
            size = 0
            while True:
                chunk = conn.read(1 << 20)
                if not chunk:
                    break
                size += len(chunk)
                if size > max_bytes:
                    state["truncated"] = True
                    chunks.append(chunk[: len(chunk) - (size - max_bytes)])
                    break
                chunks.append(chunk)
        except OSError:
            if not stopper.tripped:
                raise
        finally:
            conn.close()

    call(stopper, open_and_read)
    return ServiceOutput(b"".join(chunks), state["opened"], state["truncated"])


def _reader(output: StreamOutput, stopper: Stopper, max_bytes: int) -> Callable[[Connection], None]:
    def handler(conn: Connection) -> None:
        output.opened = True
        try:
            conn.socket.settimeout(None)
            while True:
                chunk = conn.read(65536)
                if not chunk:
                    break
                room = max_bytes - len(output.data)
                if len(chunk) <= room:
                    output.data += chunk
                    continue
                output.truncated = True
                # Keep the newest bytes: completion markers come last.
                output.data = (output.data + chunk)[-max_bytes:]
        except OSError:
            if not stopper.tripped:
                raise
        finally:
            conn.close()

    return handler
