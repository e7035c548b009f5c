"""`amc serve` as a real process on a free port, for the tests that need the whole command."""

from __future__ import annotations

import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from tests.support.http import Caller, http_client

LISTENING = re.compile(r"listening on (http://\S+)")


class Served:
    """An `amc serve` subprocess and a caller per token; on a free port, or on `port`."""

    def __init__(self, data: Path, *options: str, tokens: Path | None = None, port: int = 0, log: Path | None = None):
        """`log`: a file for the server's stderr (appended to), for a run that logs more than a pipe holds."""
        command = [
            sys.executable,
            "-c",
            "from amc.cli import main; main()",
            "serve",
            "--data",
            str(data),
            "--port",
            str(port),
            "--log-level",
            "warning",
            *options,
        ]
        if tokens is not None:
            command += ["--tokens", str(tokens)]
        stderr = subprocess.PIPE if log is None else log.open("a")
        self.process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=stderr, text=True)
        if log is not None:
            stderr.close()  # the child has its own descriptor
        self.output: list[str] = []
        self.url = self._wait_for_url()
        self.http = http_client(self.url)

    def _wait_for_url(self, timeout: float = 20) -> str:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            line = self.process.stdout.readline()
            if not line:
                errors = self.process.stderr.read() if self.process.stderr else "(stderr in its log file)"
                raise AssertionError(f"amc serve exited: {self.process.wait()} {errors}")
            self.output.append(line)
            found = LISTENING.search(line)
            if found:
                threading.Thread(target=self._drain, daemon=True).start()
                return found.group(1)
        raise AssertionError("amc serve did not start")

    def _drain(self) -> None:
        for line in self.process.stdout:
            self.output.append(line)

    def caller(self, token: str) -> Caller:
        return Caller(self.http, token)

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 15) -> int:
        self.process.send_signal(sig)
        code = self.process.wait(timeout)
        self.http.close()
        return code
