"""`amc sim` in its own process: it serves, its log is readable from outside, SIGTERM stops it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading

from amc.adapters.adb._ppadb import Client
from amc.sim import fetch_log


def test_amc_sim_serves_until_sigterm():
    process = subprocess.Popen(
        [sys.executable, "-c", "from amc.cli import main; main()", "sim", "--devices", "2", "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    killer = threading.Timer(30, process.kill)  # never leave it behind if the test breaks
    killer.start()
    try:
        lines = []
        while (line := process.stdout.readline()) and line != "ready\n":
            lines.append(line)
        assert lines[0].startswith("server 127.0.0.1:"), lines
        port = int(lines[0].rsplit(":", 1)[1])
        assert [line.split()[:3] for line in lines[1:]] == [
            ["device", "amc-sim-01", "adbd"],
            ["device", "amc-sim-02", "adbd"],
        ]
        client = Client("127.0.0.1", port)
        assert [device.serial for device in client.devices()] == ["amc-sim-01", "amc-sim-02"]
        client.device("amc-sim-02").shell("input keyevent 3")
        assert [r.command for r in fetch_log(port, "amc-sim-02")] == ["input keyevent 3"]
        process.send_signal(signal.SIGTERM)
        out, err = process.communicate(timeout=5)
        assert process.returncode == 0, err
        assert out.endswith("stopped\n")
    finally:
        killer.cancel()
        if process.poll() is None:
            process.kill()
            process.wait()
