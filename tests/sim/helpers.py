"""Helpers for the tests that drive a SimDevice directly (no sockets)."""

from __future__ import annotations

import threading

from amc.sim.device import SimDevice
from amc.sim.process import StreamClosed


class BufferSink:
    def __init__(self):
        self.data = bytearray()
        self.closed = threading.Event()
        self.broken = False

    def write(self, data: bytes) -> None:
        if self.broken:
            raise StreamClosed()
        self.data += data

    def close(self) -> None:
        self.closed.set()


def run(device: SimDevice, command: str) -> str:
    sink = BufferSink()
    process = device.start_shell(command, sink, via="test")
    assert process.done.wait(5)
    return sink.data.decode()
