"""`push` and `pull`: files to and from the device through the sync service (specs/adb.md §1.4).

The sync framing is spoken here rather than through ppadb's `Sync`: its `pull` spins forever
on a connection that ends without DONE or FAIL, and its `push` writes with `send`, which may
send part of a chunk. Each transfer is one `sync:` connection made by ppadb (so the action's
`Stopper` tracks it and a deadline or an interrupt cuts it), read to exactly DONE, OKAY or
FAIL.

Outputs (JSON): `{"path", "size", "sha256"}` of the bytes that went over; `pull`'s file is the
step's artifact.
"""

from __future__ import annotations

import hashlib
import socket
import struct
import time
from pathlib import Path
from typing import Any

from .calls import ActionResult, Call, as_json, required
from .client import call as guarded
from .errors import DeviceUnavailable, StepFailed

CHUNK = 64 * 1024  # the largest DATA a device takes
MAX_PULL_BYTES = 512 * 1024 * 1024  # an artifact's bytes are bounded on the server too
FILE_MODE = 0o100644  # a regular file, rw-r--r--
OCTETS = "application/octet-stream"
# Moving a file is bounded by its size: this long at least, plus a second per this many bytes.
MIN_TRANSFER_SECONDS = 30.0
BYTES_PER_SECOND = 4 * 1024 * 1024
_U32 = struct.Struct("<I")


def push(call: Call, args: dict[str, Any]) -> ActionResult:
    local = call.input_file(args, "input")
    path = required(args, "path", str)
    size, digest = send_file(call, local, path)
    return call.result("push", output=as_json({"path": path, "size": size, "sha256": digest}))


def pull(call: Call, args: dict[str, Any]) -> ActionResult:
    path = required(args, "path", str)
    call.set_deadline(MIN_TRANSFER_SECONDS + MAX_PULL_BYTES / BYTES_PER_SECOND)
    artifact = call.new_artifact(call.step_id or "pull", Path(path).suffix[:16] or ".bin")
    try:
        size, digest = _receive(call, path, artifact)
    except BaseException:
        artifact.unlink(missing_ok=True)
        raise
    output = as_json({"path": path, "size": size, "sha256": digest})
    return call.result("pull", output=output, artifact=artifact, content_type=OCTETS)


def send_file(call: Call, local: Path, path: str) -> tuple[int, str]:
    """Write the local file to `path` on the device; its size and sha256."""
    size = local.stat().st_size
    call.set_deadline(MIN_TRANSFER_SECONDS + size / BYTES_PER_SECOND)
    call.sent.append(f"sync:SEND {path}")
    digest = hashlib.sha256()

    def transfer() -> None:
        sock = _open(call)
        try:
            _request(sock, b"SEND", f"{path},{FILE_MODE}")
            with open(local, "rb") as file:
                while chunk := file.read(CHUNK):
                    digest.update(chunk)
                    sock.sendall(b"DATA" + _U32.pack(len(chunk)) + chunk)
            sock.sendall(b"DONE" + _U32.pack(int(time.time())))
            ident, length = _header(sock)
            if ident != b"OKAY":
                raise StepFailed(f"the device refused to write {path}: {_message(sock, ident, length)}")
        finally:
            sock.close()

    _run(call, transfer, f"pushing {path}")
    return size, digest.hexdigest()


def _receive(call: Call, path: str, into: Path) -> tuple[int, str]:
    call.sent.append(f"sync:RECV {path}")
    digest = hashlib.sha256()
    size = 0

    def transfer() -> None:
        nonlocal size
        sock = _open(call)
        try:
            _request(sock, b"RECV", path)
            with open(into, "wb") as file:
                while True:
                    ident, length = _header(sock)
                    if ident == b"DONE":
                        return
                    if ident != b"DATA":
                        raise StepFailed(f"the device could not read {path}: {_message(sock, ident, length)}")
                    size += length
                    if size > MAX_PULL_BYTES:
                        raise StepFailed(f"{path} is larger than {MAX_PULL_BYTES} bytes, the bound of a pulled file")
                    data = _exactly(sock, length)
                    digest.update(data)
                    file.write(data)
        finally:
            sock.close()

    _run(call, transfer, f"pulling {path}")
    return size, digest.hexdigest()


def _run(call: Call, transfer: Any, what: str) -> None:
    guarded(call.stopper, transfer)
    if call.stopper.tripped:
        call.stopped(what, b"")


def _open(call: Call) -> socket.socket:
    """A `sync:` connection to the device (ppadb's, so the stopper tracks its socket)."""
    conn = call.device.sync()
    sock: socket.socket = conn.socket
    return sock


def _request(sock: socket.socket, ident: bytes, argument: str) -> None:
    data = argument.encode("utf-8")
    sock.sendall(ident + _U32.pack(len(data)) + data)


def _header(sock: socket.socket) -> tuple[bytes, int]:
    head = _exactly(sock, 8)
    return head[:4], _U32.unpack_from(head, 4)[0]


def _message(sock: socket.socket, ident: bytes, length: int) -> str:
    if ident != b"FAIL":
        return f"unexpected {ident!r}"
    return _exactly(sock, min(length, 4096)).decode("utf-8", "replace")


def _exactly(sock: socket.socket, length: int) -> bytes:
    data = bytearray()
    while len(data) < length:
        piece = sock.recv(min(length - len(data), CHUNK))
        if not piece:
            raise DeviceUnavailable("the sync connection ended mid-transfer: the device or adb went away")
        data += piece
    return bytes(data)
