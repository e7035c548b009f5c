"""The device side of a `sync:` stream (specs/adb.md §1.4, §3.8), without any IO.

Both front ends feed it the bytes they receive, however they were split, and send the
replies it returns, one whole sync message per reply. The file store is the device's
flat `files` dict, shared with `screencap FILE`, `cat`, `rm` and `pm install`.

Every RECV ends with DONE or FAIL: ppadb's `pull()` spins forever otherwise.
"""

from __future__ import annotations

import struct
import time

from .device import SimDevice

CHUNK = 64 * 1024  # what a real adbd sends per DATA
_U32 = struct.Struct("<I")
_S_IFREG = 0o100000
_S_IFDIR = 0o040000


def _message(ident: bytes, *values: int, payload: bytes = b"") -> bytes:
    return ident + b"".join(_U32.pack(value) for value in values) + payload


def fail(message: str) -> bytes:
    data = message.encode()
    return _message(b"FAIL", len(data), payload=data)


class SyncSession:
    """Parses sync requests and produces the device's replies."""

    def __init__(self, device: SimDevice, *, via: str):
        self._device = device
        self._via = via
        self._buffer = bytearray()
        self._receiving: tuple[str, int, int] | None = None  # (path, mode, log seq) during SEND
        self._incoming = bytearray()
        self.finished = False

    def feed(self, data: bytes) -> list[bytes]:
        """Consume received bytes; return the replies to send, in order."""
        self._buffer += data
        replies: list[bytes] = []
        while not self.finished and len(self._buffer) >= 8:
            ident = bytes(self._buffer[:4])
            (length,) = _U32.unpack_from(self._buffer, 4)
            if self._receiving is not None:
                consumed = self._file_data(ident, length, replies)
            else:
                consumed = self._request(ident, length, replies)
            if consumed is None:
                break  # wait for more bytes
            del self._buffer[:consumed]
        return replies

    def close(self) -> None:
        """The stream ended: a file still being sent is abandoned."""
        if self._receiving is not None:
            self._device.log.finish(self._receiving[2], end="interrupted")
            self._receiving = None
        self.finished = True

    def _request(self, ident: bytes, length: int, replies: list[bytes]) -> int | None:
        if ident == b"QUIT":
            self.finished = True
            return 8
        if ident not in (b"STAT", b"LIST", b"RECV", b"SEND"):
            replies.append(fail(f"unknown sync request {ident!r}"))
            self.finished = True
            return 8
        if len(self._buffer) < 8 + length:
            return None
        argument = bytes(self._buffer[8 : 8 + length]).decode("utf-8", "replace")
        log = self._device.log
        seq = log.begin(service="sync", command=f"{ident.decode()} {argument}", via=self._via)
        files = self._device.files
        if ident == b"SEND":
            path, _, mode = argument.rpartition(",")
            self._receiving = (path or argument, int(mode) if mode.isdigit() else _S_IFREG | 0o644, seq)
            self._incoming.clear()
        elif ident == b"RECV":
            data = files.get(argument)
            if data is None:
                replies.append(fail("No such file or directory"))
                log.finish(seq, end="completed", exit_status=1)
            else:
                for start in range(0, len(data), CHUNK):
                    piece = data[start : start + CHUNK]
                    replies.append(_message(b"DATA", len(piece), payload=piece))
                replies.append(_message(b"DONE", 0))
                log.add_output(seq, len(data))
                log.finish(seq, end="completed", exit_status=0)
        elif ident == b"STAT":
            replies.append(self._stat(argument))
            log.finish(seq, end="completed", exit_status=0)
        else:  # LIST
            prefix = argument.rstrip("/") + "/"
            now = int(time.time())
            for path in sorted(files):
                if path.startswith(prefix) and "/" not in path[len(prefix) :]:
                    name = path[len(prefix) :].encode()
                    replies.append(_message(b"DENT", _S_IFREG | 0o644, len(files[path]), now, len(name), payload=name))
            replies.append(_message(b"DONE", 0, 0, 0, 0))
            log.finish(seq, end="completed", exit_status=0)
        return 8 + length

    def _file_data(self, ident: bytes, length: int, replies: list[bytes]) -> int | None:
        assert self._receiving is not None, "DATA and DONE come only during a SEND"
        path, _mode, seq = self._receiving
        if ident == b"DATA":
            if len(self._buffer) < 8 + length:
                return None
            self._incoming += self._buffer[8 : 8 + length]
            return 8 + length
        if ident == b"DONE":  # `length` is the mtime here
            self._device.files[path] = bytes(self._incoming)
            self._device.log.add_output(seq, len(self._incoming))
            self._device.log.finish(seq, end="completed", exit_status=0)
            self._receiving = None
            replies.append(_message(b"OKAY", 0))
            return 8
        replies.append(fail(f"unexpected {ident!r} while receiving {path}"))
        self._device.log.finish(seq, end="completed", exit_status=1)
        self._receiving = None
        self.finished = True
        return 8

    def _stat(self, path: str) -> bytes:
        files = self._device.files
        if path in files:
            return _message(b"STAT", _S_IFREG | 0o644, len(files[path]), int(time.time()))
        if any(name.startswith(path.rstrip("/") + "/") for name in files) or path in (
            "/",
            "/sdcard",
            "/data/local/tmp",
        ):
            return _message(b"STAT", _S_IFDIR | 0o755, 4096, int(time.time()))
        return _message(b"STAT", 0, 0, 0)
