"""A whole local stack for the MCP tests: `amc up` (server, simulated phones, a Host Agent) as a
subprocess, and the MCP SDK's own client starting `amc mcp` on stdio against it."""

from __future__ import annotations

import json
import os
import queue
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from mcp import Client, StdioServerParameters


class Stack:
    """`amc up --sim-devices N` in `directory`; its URL and client token; stopped with Ctrl-C."""

    def __init__(self, directory: Path, devices: int = 2, *extra: str):
        env = {key: value for key, value in os.environ.items() if not key.startswith("AMC_")}
        self.log = directory / "amc-up.log"
        with self.log.open("w") as log:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "amc", "up", "--port", "0", "--devices", "sim", "--sim-devices", str(devices)]
                + list(extra),
                cwd=directory,
                env=env,
                text=True,
                stdout=subprocess.PIPE,
                stderr=log,
            )
        lines: queue.Queue = queue.Queue()
        threading.Thread(target=self._pump, args=(lines,), daemon=True).start()
        banner = ""
        deadline = time.monotonic() + 60
        while "Ctrl-C stops everything" not in banner:
            line = lines.get(timeout=max(0.01, deadline - time.monotonic()))
            assert line is not None, f"amc up exited:\n{banner}\n{self.log.read_text()}"
            banner += line
        self.url = re.search(r"server\s+(http://\S+)", banner).group(1)
        tokens = json.loads((directory / ".amc" / "tokens.json").read_text())
        self.token = next(entry["token"] for entry in tokens if entry["role"] == "client")

    def _pump(self, lines: queue.Queue) -> None:
        for line in self.process.stdout:
            lines.put(line)
        lines.put(None)

    def mcp_client(self, **options) -> Client:
        """The SDK's client, which starts `amc mcp` (stdio) with AMC_URL and AMC_TOKEN, as an MCP host would."""
        command = StdioServerParameters(
            command=sys.executable,
            args=["-m", "amc", "mcp"],
            env={"AMC_URL": self.url, "AMC_TOKEN": self.token},
        )
        return Client(command, **options)

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)
            try:
                self.process.wait(40)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
