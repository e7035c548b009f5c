"""The simulated adb server, through ppadb and through raw smart-socket bytes."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time

import pytest

from amc.adapters.adb._ppadb import Client, Device
from amc.sim import CommandRecord, Simulator, SimulatorError, fetch_log, fetch_state, inject_fault
from amc.sim.png import png_size
from tests.support.waiting import eventually

UNAUTHORIZED = (
    "device unauthorized.\nThis adb server's $ADB_VENDOR_KEYS is not set\n"
    "Try 'adb kill-server' if that seems wrong.\n"
    "Otherwise check for a confirmation dialog on your device."
)


def okay(payload: str) -> bytes:
    return b"OKAY%04x" % len(payload) + payload.encode()


def raw(port: int, *requests: str, read: float = 1.0) -> bytes:
    """Send framed requests on one connection; return every byte until EOF."""
    with socket.create_connection(("127.0.0.1", port), timeout=read) as sock:
        for request in requests:
            sock.sendall(b"%04X" % len(request) + request.encode())
        data = bytearray()
        try:
            while chunk := sock.recv(65536):
                data += chunk
        except TimeoutError:
            data += b"<timeout>"
        return bytes(data)


def test_host_services_match_the_real_server(sim):
    port = sim.server_port
    assert raw(port, "host:version") == b"OKAY00040029"
    assert raw(port, "host:devices") == okay("amc-sim-01\tdevice\namc-sim-02\tdevice\namc-sim-raw\tdevice\n")
    assert raw(port, "host:transport:nosuch") == b"FAIL0019device 'nosuch' not found"
    assert raw(port, "host:bogus") == b"FAIL0014unknown host service"
    assert raw(port, "host:transport-any") == b"FAIL001dmore than one device/emulator"
    assert raw(port, "host:transport:amc-sim-01", "shell:echo raw") == b"OKAYOKAYraw\n"
    assert raw(port, "host:transport:amc-sim-01", "reboot:") == b"OKAYFAIL0006closed"
    assert raw(port, "host-serial:amc-sim-01:features") == b"OKAY0003cmd"


# ppadb leaves its socket open when a request FAILs; that leak is ppadb's, not the simulator's.
@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
def test_ppadb_client_calls(sim):
    client = Client("127.0.0.1", sim.server_port)
    assert client.version() == 41
    device = client.device("amc-sim-02")
    assert device.get_state() == "device"
    assert device.get_serial_no() == "amc-sim-02"
    assert device.get_device_path() == "unknown"
    assert device.get_properties()["ro.product.model"] == "SM-G991B"
    assert device.wm_size() == (1080, 2340)
    assert device.get_top_activity().package == "com.android.launcher3"
    assert client.device("nosuch") is None
    with pytest.raises(RuntimeError, match="0019device 'nosuch' not found"):
        Device(client, "nosuch").shell("echo")


def test_screencap_is_a_valid_png(sim):
    png = Client("127.0.0.1", sim.server_port).device("amc-sim-01").screencap()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and png[5] == 0x0A
    assert png_size(bytes(png)) == (1080, 2400)


def test_states_and_their_fail_texts(sim):
    sim.set_state("amc-sim-01", "offline")
    sim.set_state("amc-sim-02", "unauthorized")
    sim.set_state("amc-sim-raw", "absent")
    port = sim.server_port
    assert raw(port, "host:devices") == okay("amc-sim-01\toffline\namc-sim-02\tunauthorized\n")
    assert raw(port, "host:transport:amc-sim-01") == b"FAIL000edevice offline"
    assert raw(port, "host:transport:amc-sim-02") == b"FAIL00a7" + UNAUTHORIZED.encode()
    assert raw(port, "host:transport:amc-sim-raw") == b"FAIL001edevice 'amc-sim-raw' not found"
    client = Client("127.0.0.1", port)
    assert len(client.devices()) == 2, "ppadb lists offline/unauthorized devices without a state"
    assert client.devices(state="device") == []


def test_sync_push_and_pull(sim, tmp_path):
    device = Client("127.0.0.1", sim.server_port).device("amc-sim-01")
    source = tmp_path / "payload.bin"
    source.write_bytes(os.urandom(150_000))
    device.push(str(source), "/sdcard/payload.bin")
    assert device.pull("/sdcard/payload.bin", str(tmp_path / "back.bin")) is None
    assert (tmp_path / "back.bin").read_bytes() == source.read_bytes()
    assert device.pull("/sdcard/missing", str(tmp_path / "missing")) == "No such file or directory"
    assert [r.command for r in sim.log("amc-sim-01")] == [
        "SEND /sdcard/payload.bin,33188",
        "RECV /sdcard/payload.bin",
        "RECV /sdcard/missing",
    ]


def test_silent_device_accepts_the_transport_then_never_answers(sim):
    sim.set_silent("amc-sim-01")
    assert raw(sim.server_port, "host:transport:amc-sim-01", "shell:echo hi", read=0.5) == b"OKAY<timeout>"


def test_log_and_state_are_readable_out_of_process(sim):
    Client("127.0.0.1", sim.server_port).device("amc-sim-01").input_tap(5, 6)
    records = fetch_log(sim.server_port, "amc-sim-01")
    assert [(r.command, r.end, r.exit_status, r.via) for r in records] == [("input tap 5 6", "completed", 0, "server")]
    assert isinstance(records[0], CommandRecord) and records[0].ended_at >= records[0].started_at
    assert fetch_state(sim.server_port, "amc-sim-01")["input_events"] == ["tap 5 6"]
    with pytest.raises(SimulatorError, match="not found"):
        fetch_log(sim.server_port, "nosuch")
    # The helper really works from another process.
    script = "import sys; from amc.sim import fetch_log; print(fetch_log(int(sys.argv[1]), 'amc-sim-01')[0].command)"
    result = subprocess.run(
        [sys.executable, "-c", script, str(sim.server_port)], capture_output=True, text=True, timeout=30
    )
    assert result.stdout == "input tap 5 6\n", result.stderr


def test_faults_can_be_injected_out_of_process(sim):
    inject_fault(sim.server_port, "amc-sim-02", state="offline")
    assert sim.device("amc-sim-02").state == "offline"
    inject_fault(sim.server_port, "amc-sim-02", state="device", silent=True)
    assert sim.device("amc-sim-02").silent
    with pytest.raises(SimulatorError, match="unknown fault keys"):
        inject_fault(sim.server_port, "amc-sim-02", explode=True)


def test_client_reset_interrupts_the_command(sim):
    device = Client("127.0.0.1", sim.server_port).device("amc-sim-01")

    def read_a_bit_and_close(connection):
        connection.read(7)  # "tick 1\n"
        connection.close()  # RST, as ppadb always does

    device.shell("amc-sim-ticker 30", handler=read_a_bit_and_close)
    record = eventually(lambda: [r for r in sim.log("amc-sim-01") if r.end != "running"])[0]
    assert record.end == "interrupted"
    assert record.ended_at - record.started_at < 1.0


def test_simulator_refuses_emulator_ports_and_stops_fast():
    with pytest.raises(ValueError, match="5555-5585"):
        Simulator(2, device_base_port=5554)
    simulator = Simulator(2).start()
    client = Client("127.0.0.1", simulator.server_port)
    left_open = []
    client.device("amc-sim-01").shell("sleep 30", handler=left_open.append)
    started = time.monotonic()
    simulator.stop()
    assert time.monotonic() - started < 1.5
    left_open[0].close()
    assert simulator.log("amc-sim-01")[0].end in ("killed", "interrupted")
    with pytest.raises(RuntimeError, match="connecting"):
        client.version()
