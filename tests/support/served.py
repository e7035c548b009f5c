"""`amc serve` as a real process on a free port, for the tests that need the whole command."""

from __future__ import annotations

import signal
from pathlib import Path

from amc.cli.launch import LaunchError, Server, Sink
from tests.support.http import Caller, http_client


def serve(
    data: Path, *options: str, sink: Sink, tokens: Path | None = None, port: int = 0, timeout: float = 30
) -> Server:
    """`amc serve` started by the launcher; a failed start fails the test with the server's last lines."""
    try:
        return Server(data, *options, tokens=tokens, port=port, sink=sink, timeout=timeout)
    except LaunchError as error:
        raise AssertionError(error.report()) from None


class Served:
    """An `amc serve` subprocess and a caller per token; on a free port, or on `port`.

    `output` holds its output lines (stdout and stderr together); `process` is its `Popen`."""

    def __init__(self, data: Path, *options: str, tokens: Path | None = None, port: int = 0, log: Path | None = None):
        """`log`: a file the server's output is appended to instead, for a run that logs more than a test should hold."""
        self.output: list[str] = []
        self._log = log
        self.server = serve(data, *options, sink=self._keep, tokens=tokens, port=port, timeout=20)
        self.process = self.server.process
        self.url = self.server.url
        self.http = http_client(self.url)

    def _keep(self, name: str, line: str) -> None:
        if self._log is None:
            self.output.append(line + "\n")
        else:
            with self._log.open("a") as log:
                log.write(line + "\n")

    def caller(self, token: str) -> Caller:
        return Caller(self.http, token)

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 15) -> int:
        self.server.signal(sig)
        code = self.process.wait(timeout)
        self.server.wait(timeout)  # its output all read
        self.http.close()
        return code
