"""The simulated adbd, spoken to at packet level the way an adb server does (specs/adb.md §3)."""

from __future__ import annotations

import socket

import pytest

from amc.sim.packets import A_AUTH, A_CLSE, A_CNXN, A_OKAY, A_OPEN, A_WRTE, HEADER, Packet, PacketReader, encode
from tests.support.waiting import eventually

HOST_BANNER = b"host::features=remount_shell,abb_exec,abb,apex,fixed_push_mkdir,ls_v2,stat_v2,cmd,shell_v2"


class FakeHost:
    """The host half of the transport, with a 1 s receive timeout."""

    def __init__(self, port: int):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=1.0)
        self.reader = PacketReader()
        self.pending: list[Packet] = []

    def send(self, command, arg0, arg1, data=b"", checksum_zero=False):
        packet = encode(command, arg0, arg1, data)
        if checksum_zero:  # what adb 29 sends after negotiation
            packet = packet[:16] + b"\0\0\0\0" + packet[20:]
        self.sock.sendall(packet)

    def receive(self) -> Packet:
        while not self.pending:
            data = self.sock.recv(65536)
            assert data, "the device closed the connection"
            self.pending += self.reader.feed(data)
        return self.pending.pop(0)

    def nothing_within(self, seconds: float) -> bool:
        self.sock.settimeout(seconds)
        try:
            return not self.pending and not self.sock.recv(65536, socket.MSG_PEEK)
        except TimeoutError:
            return True
        finally:
            self.sock.settimeout(1.0)

    def handshake(self, maxdata=0x100000) -> Packet:
        self.send(A_CNXN, 0x01000001, maxdata, HOST_BANNER)
        return self.receive()

    def close(self):
        self.sock.close()


@pytest.fixture
def host(sim):
    fake = FakeHost(sim.device_ports["amc-sim-01"])
    yield fake
    fake.close()


def test_cnxn_banner_and_checksum(host, sim):
    raw = bytearray()
    host.send(A_CNXN, 0x01000001, 0x100000, HOST_BANNER)
    while len(raw) < HEADER.size or len(raw) < HEADER.size + HEADER.unpack_from(raw)[3]:
        raw += host.sock.recv(65536)
    command, version, maxdata, length, checksum, magic = HEADER.unpack_from(raw)
    payload = bytes(raw[HEADER.size : HEADER.size + length])
    assert command == A_CNXN and magic == A_CNXN ^ 0xFFFFFFFF
    assert version == 0x01000001 and maxdata == 256 * 1024
    assert checksum == sum(payload)
    assert payload == (
        b"device::ro.product.name=panther;ro.product.model=Pixel 7;ro.product.device=panther;features=cmd"
    )


def test_shell_stream_with_flow_control(host, sim):
    host.handshake()
    host.send(A_OPEN, 0x16, 0, b"shell:amc-sim-ticker 0.3\0", checksum_zero=True)
    ready = host.receive()
    assert (ready.command, ready.arg1) == (A_OKAY, 0x16) and ready.arg0 != 0
    device_id = ready.arg0
    first = host.receive()
    assert (first.command, first.arg0, first.arg1, first.data) == (A_WRTE, device_id, 0x16, b"tick 1\n")
    # No OKAY from us yet: the device must not send the next WRTE, however long it waits.
    assert host.nothing_within(0.4)
    lines = [first.data]
    while True:
        host.send(A_OKAY, 0x16, device_id)
        packet = host.receive()
        if packet.command == A_CLSE:
            assert (packet.arg0, packet.arg1) == (device_id, 0x16)
            break
        assert packet.command == A_WRTE
        lines.append(packet.data)
    assert b"".join(lines).startswith(b"tick 1\ntick 2\n")
    assert sim.log("amc-sim-01")[0].via == "adbd"


def test_refused_open_and_unknown_ids(host):
    host.handshake()
    host.send(A_OKAY, 0x30, 0x999)  # for a stream that does not exist: ignored
    host.send(A_OPEN, 0x17, 0, b"reboot:\0")
    refused = host.receive()
    assert (refused.command, refused.arg0, refused.arg1) == (A_CLSE, 0, 0x17)


def test_host_clse_interrupts_the_process(host, sim):
    host.handshake()
    host.send(A_OPEN, 0x18, 0, b"shell:sleep 30\0")
    device_id = host.receive().arg0
    host.send(A_CLSE, 0x18, device_id)
    record = eventually(lambda: [r for r in sim.log("amc-sim-01") if r.end != "running"])[0]
    assert (record.end, record.signal) == ("interrupted", "SIGHUP")


def test_sync_over_wrte(host, sim):
    host.handshake()
    host.send(A_OPEN, 0x19, 0, b"sync:\0")
    device_id = host.receive().arg0
    data = b"x" * 70_000
    request = b"SEND" + len(b"/sdcard/f.bin,33188").to_bytes(4, "little") + b"/sdcard/f.bin,33188"
    request += b"DATA" + len(data).to_bytes(4, "little") + data + b"DONE" + (0).to_bytes(4, "little")
    # Split where an application message does not end, as real hosts do (specs/adb.md §3.6).
    for start in range(0, len(request), 30_000):
        host.send(A_WRTE, 0x19, device_id, request[start : start + 30_000])
        assert host.receive().command == A_OKAY
    reply = host.receive()
    assert (reply.command, reply.data) == (A_WRTE, b"OKAY\0\0\0\0")
    assert sim.device("amc-sim-01").files["/sdcard/f.bin"] == data


def test_unauthorized_device_sends_auth_and_never_cnxn(sim):
    sim.set_state("amc-sim-02", "unauthorized")
    host = FakeHost(sim.device_ports["amc-sim-02"])
    try:
        token = host.handshake()
        assert (token.command, token.arg0, len(token.data)) == (A_AUTH, 1, 20)
        host.send(A_AUTH, 2, 0, b"s" * 256)
        assert host.receive().command == A_AUTH, "a rejected signature gets a new token"
    finally:
        host.close()


def test_offline_device_stays_mute(sim):
    sim.set_state("amc-sim-02", "offline")
    host = FakeHost(sim.device_ports["amc-sim-02"])
    try:
        host.send(A_CNXN, 0x01000001, 0x100000, HOST_BANNER)
        assert host.nothing_within(0.3)
    finally:
        host.close()


def test_wrte_never_exceeds_the_negotiated_payload(host, sim):
    host.handshake(maxdata=4096)
    host.send(A_OPEN, 0x1A, 0, b"shell:screencap -p\0")
    device_id = host.receive().arg0
    sizes = []
    while (packet := host.receive()).command == A_WRTE:
        sizes.append(len(packet.data))
        host.send(A_OKAY, 0x1A, device_id)
    assert max(sizes) == 4096 and len(sizes) > 1
