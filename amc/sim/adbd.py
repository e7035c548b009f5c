"""The simulated *adbd*: the device transport protocol (specs/adb.md §3, §4.2).

A real `adb` server reaches it with `adb connect 127.0.0.1:PORT`. One thread reads the
connection's packets and dispatches them; it never blocks on a stream, because a
stream's writer waits for the host's OKAY and that OKAY arrives on this very thread.

- CNXN: answered with our CNXN and banner (`features=cmd`, no shell_v2, so both the adb
  CLI and ppadb use legacy raw `shell:`). An unauthorized device sends AUTH tokens and
  never CNXN; an offline one stays mute, which the host lists as `offline`.
- OPEN `shell:`/`exec:`: a process whose output goes out as WRTEs of at most the
  negotiated payload size, each waiting for the host's OKAY (flow control); CLSE at the end.
- OPEN `sync:`: a SyncSession fed by the host's WRTEs on a worker thread.
- Anything else is refused with CLSE(0, id), which a client sees as `FAIL closed`.
- CLSE from the host (the client closed its socket): the process gets its hangup.
"""

from __future__ import annotations

import itertools
import os
import queue
import socket
import threading

from .device import SimDevice
from .packets import (
    A_AUTH,
    A_CLSE,
    A_CNXN,
    A_OKAY,
    A_OPEN,
    A_VERSION,
    A_WRTE,
    AUTH_SIGNATURE,
    AUTH_TOKEN,
    Packet,
    PacketError,
    PacketReader,
    encode,
)
from .process import SimProcess, StreamClosed
from .sync import SyncSession
from .tcp import PEER_GONE, send_all, shutdown_quietly

DEVICE_MAXDATA = 256 * 1024


def banner(device: SimDevice) -> bytes:
    """`device::key=value;...`: the host shows these in `adb devices -l` (`:`/`;` removed)."""

    def clean(value: str) -> str:
        return value.replace(":", "_").replace(";", "_")

    spec = device.spec
    return (
        f"device::ro.product.name={clean(spec.product)};ro.product.model={clean(spec.model)};"
        f"ro.product.device={clean(spec.product)};features=cmd"
    ).encode()


class _Stream:
    """One open stream; a SimProcess writes to it as its output sink."""

    def __init__(self, connection: AdbdConnection, local_id: int, remote_id: int):
        self.connection = connection
        self.local_id = local_id
        self.remote_id = remote_id
        self.process: SimProcess | None = None
        self._cond = threading.Condition()
        self._ready = True  # no WRTE is waiting for the host's OKAY
        self._closed = False

    def write(self, data: bytes) -> None:
        limit = self.connection.max_payload
        for start in range(0, len(data), limit):
            with self._cond:
                while not self._ready and not self._closed:
                    self._cond.wait()
                if self._closed:
                    raise StreamClosed()
                self._ready = False
            if not self.connection.send(A_WRTE, self.local_id, self.remote_id, data[start : start + limit]):
                raise StreamClosed()

    def close(self) -> None:
        """Our side is done: CLSE to the host."""
        if self._mark_closed():
            self.connection.send(A_CLSE, self.local_id, self.remote_id)
        self.connection.forget(self.local_id)

    def acknowledged(self) -> None:
        with self._cond:
            self._ready = True
            self._cond.notify_all()

    def received(self, data: bytes) -> None:
        """Stdin of a raw shell: ignored, as the simulated programs read none."""

    def peer_closed(self) -> None:
        self._mark_closed()
        if self.process is not None:
            self.process.hangup()

    def _mark_closed(self) -> bool:
        with self._cond:
            was_open = not self._closed
            self._closed = True
            self._cond.notify_all()
            return was_open


class _SyncStream(_Stream):
    """A `sync:` stream: the host's bytes go through a SyncSession on a worker thread."""

    def __init__(self, connection: AdbdConnection, local_id: int, remote_id: int):
        super().__init__(connection, local_id, remote_id)
        self._inbox: queue.Queue[bytes | None] = queue.Queue()
        self._session = SyncSession(connection.device, via="adbd")
        threading.Thread(target=self._work, daemon=True, name="sim-adbd-sync").start()

    def received(self, data: bytes) -> None:
        self._inbox.put(data)

    def peer_closed(self) -> None:
        super().peer_closed()
        self._inbox.put(None)

    def _work(self) -> None:
        try:
            while not self._session.finished:
                data = self._inbox.get()
                if data is None:
                    return
                replies = self._session.feed(data)
                if replies:
                    self.write(b"".join(replies))
            self.close()
        except StreamClosed:
            pass
        finally:
            self._session.close()


class AdbdConnection:
    """One TCP connection from an adb server to this device."""

    def __init__(self, device: SimDevice, sock: socket.socket):
        self.device = device
        self._sock = sock
        self._send_lock = threading.Lock()
        self._streams: dict[int, _Stream] = {}
        self._streams_lock = threading.Lock()
        self._ids = itertools.count(1)
        self._online = False
        self.max_payload = DEVICE_MAXDATA
        self.checksums = True  # until the host's CNXN says it skips them

    def send(self, command: int, arg0: int, arg1: int, data: bytes = b"") -> bool:
        with self._send_lock:
            return send_all(self._sock, encode(command, arg0, arg1, data, checksum=self.checksums))

    def forget(self, local_id: int) -> None:
        with self._streams_lock:
            self._streams.pop(local_id, None)

    def run(self) -> None:
        if self.device.state == "absent":
            return
        reader = PacketReader()
        link = self.device.add_link(lambda: shutdown_quietly(self._sock))
        try:
            while True:
                try:
                    data = self._sock.recv(65536)
                except PEER_GONE:
                    return
                if not data:
                    return
                for packet in reader.feed(data):
                    self._dispatch(packet)
        except PacketError:
            return
        finally:
            self.device.remove_link(link)
            with self._streams_lock:
                streams = list(self._streams.values())
                self._streams.clear()
            for stream in streams:
                stream.peer_closed()

    def _dispatch(self, packet: Packet) -> None:
        if packet.command in (A_CNXN, A_AUTH):
            self._handshake(packet)
        elif not self._online:
            return  # packets before CNXN are ignored (protocol.txt)
        elif packet.command == A_OPEN:
            self._open(packet.arg0, packet.data.rstrip(b"\x00").decode("utf-8", "replace"))
        else:
            with self._streams_lock:
                stream = self._streams.get(packet.arg1)
            if stream is None:
                return  # OKAY/WRTE/CLSE for a stream we already dropped
            if packet.command == A_OKAY:
                stream.acknowledged()
            elif packet.command == A_WRTE:
                self.send(A_OKAY, stream.local_id, stream.remote_id)
                stream.received(packet.data)
            elif packet.command == A_CLSE:
                self.forget(stream.local_id)
                stream.peer_closed()

    def _handshake(self, packet: Packet) -> None:
        state = self.device.state
        if state == "device":
            if packet.command == A_CNXN:
                self.max_payload = max(1, min(DEVICE_MAXDATA, packet.arg1 or DEVICE_MAXDATA))
            self._online = True
            self.send(A_CNXN, A_VERSION, DEVICE_MAXDATA, banner(self.device))
            # After our CNXN (checksummed, whatever the host), the version both sides speak decides.
            self.checksums = packet.command != A_CNXN or packet.arg0 < A_VERSION
        elif state == "unauthorized" and (packet.command == A_CNXN or packet.arg0 == AUTH_SIGNATURE):
            # A fresh token rejects the host's signature; the public key (type 3) then
            # waits for a user who never accepts.
            self.send(A_AUTH, AUTH_TOKEN, 0, os.urandom(20))
        # offline: stay mute, so the host lists the device as offline.

    def _open(self, remote_id: int, service: str) -> None:
        if self.device.silent:
            return  # the host (and its client) will wait forever, as with a hung adbd
        local_id = next(self._ids)
        if service == "sync:":
            stream: _Stream = _SyncStream(self, local_id, remote_id)
        elif (service.startswith("shell:") and service != "shell:") or service.startswith("exec:"):
            stream = _Stream(self, local_id, remote_id)
        else:
            self.send(A_CLSE, 0, remote_id)
            return
        with self._streams_lock:
            self._streams[local_id] = stream
        self.send(A_OKAY, local_id, remote_id)
        if not isinstance(stream, _SyncStream):
            command = service.split(":", 1)[1]
            stream.process = self.device.start_shell(command, stream, via="adbd")


class AdbdServer:
    """Serves the device protocol of one SimDevice; used as a TcpListener handler."""

    def __init__(self, device: SimDevice):
        self._device = device

    def handle(self, sock: socket.socket) -> None:
        AdbdConnection(self._device, sock).run()
