"""`amc serve` as a real process on a free port, for the tests that need the whole command."""

from __future__ import annotations

import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

from tests.support.http import Caller, http_client

LISTENING = re.compile(r"listening on (http://\S+)")


def listening_url(process: subprocess.Popen, output: list[str], errors: Callable[[], str], timeout: float = 30) -> str:
    """The URL an `amc serve` process says it listens on; its lines go on into `output`."""
    deadline = time.monotonic() + timeout
    assert process.stdout is not None
    while time.monotonic() < deadline:
        line = process.stdout.readline()
        if not line:
            raise AssertionError(f"amc serve exited: {process.wait()} {errors()}")
        output.append(line)
        found = LISTENING.search(line)
        if found:
            threading.Thread(target=lambda: output.extend(process.stdout or ()), daemon=True).start()
            return found.group(1)
    raise AssertionError("amc serve did not start")


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

    def _wait_for_url(self) -> str:
        return listening_url(
            self.process,
            self.output,
            lambda: self.process.stderr.read() if self.process.stderr else "(stderr in its log file)",
            timeout=20,
        )

    def caller(self, token: str) -> Caller:
        return Caller(self.http, token)

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 15) -> int:
        self.process.send_signal(sig)
        code = self.process.wait(timeout)
        self.http.close()
        return code
