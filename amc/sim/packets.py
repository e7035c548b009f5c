"""The adbd transport packet codec (specs/adb.md §3.1-3.3), without any IO.

A packet is a 24-byte header of six little-endian u32 fields (command, arg0, arg1,
data_length, data_check, magic) followed by `data_length` payload bytes. We send the
correct byte-sum checksum unless the host speaks A_VERSION (skip-checksum), where 0 is what
adbd sends (summing a raw screen frame byte by byte costs more than sending it), and we
never check the one we receive: adb 29 sends 0 after negotiation and on reconnects.
"""

from __future__ import annotations

import struct

import attrs

HEADER = struct.Struct("<6I")

A_CNXN = 0x4E584E43
A_AUTH = 0x48545541
A_OPEN = 0x4E45504F
A_OKAY = 0x59414B4F
A_WRTE = 0x45545257
A_CLSE = 0x45534C43
A_STLS = 0x534C5453

A_VERSION = 0x01000001  # A_VERSION_SKIP_CHECKSUM, what Android >= 9 and adb 29 speak
MAX_PAYLOAD = 0x00100000  # the largest maxdata any host accepts (1 MiB)

AUTH_TOKEN = 1
AUTH_SIGNATURE = 2
AUTH_RSAPUBLICKEY = 3

NAMES = {A_CNXN: "CNXN", A_AUTH: "AUTH", A_OPEN: "OPEN", A_OKAY: "OKAY", A_WRTE: "WRTE", A_CLSE: "CLSE", A_STLS: "STLS"}


class PacketError(Exception):
    """The peer sent bytes that are not an adb packet (bad magic or oversized payload)."""


@attrs.frozen
class Packet:
    """One decoded adbd packet."""

    command: int
    arg0: int
    arg1: int
    data: bytes = b""

    @property
    def name(self) -> str:
        return NAMES.get(self.command, f"0x{self.command:08x}")


def encode(command: int, arg0: int, arg1: int, data: bytes = b"", *, checksum: bool = True) -> bytes:
    """Return the wire bytes of one packet, header and payload together (`checksum` False: 0)."""
    check = sum(data) & 0xFFFFFFFF if checksum else 0
    magic = command ^ 0xFFFFFFFF
    return HEADER.pack(command, arg0, arg1, len(data), check, magic) + data


class PacketReader:
    """Turns an arbitrary split of the byte stream back into whole packets."""

    def __init__(self, max_payload: int = MAX_PAYLOAD):
        self._buffer = bytearray()
        self._max_payload = max_payload

    def feed(self, data: bytes) -> list[Packet]:
        """Add received bytes; return every packet that is now complete."""
        self._buffer += data
        packets = []
        while len(self._buffer) >= HEADER.size:
            command, arg0, arg1, length, _checksum, magic = HEADER.unpack_from(self._buffer)
            if magic != command ^ 0xFFFFFFFF:
                raise PacketError(f"bad magic for command 0x{command:08x}")
            if length > self._max_payload:
                raise PacketError(f"payload of {length} bytes exceeds {self._max_payload}")
            end = HEADER.size + length
            if len(self._buffer) < end:
                break
            packets.append(Packet(command, arg0, arg1, bytes(self._buffer[HEADER.size : end])))
            del self._buffer[:end]
        return packets
