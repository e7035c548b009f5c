"""Several `amc serve --store postgresql://...` processes on one database, and a plain HTTP
client that finds the leader itself (tests and `make failover`).

The client here is deliberately not the Host Agent's or the CLI's (another piece of work
teaches those to follow the leader): it tries each URL in turn, and takes a 503 or a refused
connection as "not this one, try the next".
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import httpx

from amc.adapters.http import tokens_file

LISTENING = re.compile(r"listening on (http://\S+)")


class Server:
    """One `amc serve` process on the shared database (its own data directory for server.json)."""

    def __init__(self, url: str, data: Path, tokens: Path, *options: str):
        command = [sys.executable, "-c", "from amc.cli import main; main()", "serve", "--store", url]
        command += ["--data", str(data), "--tokens", str(tokens), "--port", "0", "--log-level", "warning", *options]
        self.process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        self.output: list[str] = []
        self.url = self._wait_for_url()

    def _wait_for_url(self, timeout: float = 30) -> str:
        deadline = time.monotonic() + timeout
        assert self.process.stdout is not None
        while time.monotonic() < deadline:
            line = self.process.stdout.readline()
            if not line:
                raise AssertionError(f"amc serve exited: {self.process.wait()} {''.join(self.output)}")
            self.output.append(line)
            found = LISTENING.search(line)
            if found:
                threading.Thread(target=self._drain, daemon=True).start()
                return found.group(1)
        raise AssertionError("amc serve did not start")

    def _drain(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.output.append(line)

    @property
    def pid(self) -> int:
        return self.process.pid

    def signal(self, sig: int) -> None:
        os.kill(self.process.pid, sig)

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGCONT)
            self.process.terminate()
            try:
                self.process.wait(15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


def write_tokens(path: Path, host_ids: list[str]) -> dict[str, str]:
    """A tokens file with an admin, a client of tenant 'default' and a host token per host."""
    entries = tokens_file.write_initial(path, host_id=host_ids[0])
    for host_id in host_ids[1:]:
        entries.append({"token": tokens_file.new_token(), "role": "host", "host_id": host_id})
    path.write_text(json.dumps(entries))
    path.chmod(0o600)
    found = {"admin": "", "client": ""}
    for entry in entries:
        found[entry.get("host_id") or entry["role"]] = entry["token"]
    return found


class Follower:
    """A plain HTTP client over several server URLs that sends each request to the leader.

    A 503, a refused or reset connection or a timeout moves it to the next URL; it keeps
    trying (all URLs in turn) until `patience` seconds have passed. `switches` counts the moves."""

    def __init__(self, urls: list[str], token: str, patience: float = 15.0, timeout: float = 10.0):
        self.urls = urls
        self.token = token
        self.patience = patience
        self.current = 0
        self.switches = 0
        self.http = httpx.Client(timeout=timeout)

    def request(self, method: str, path: str, body: Any = None) -> httpx.Response:
        deadline = time.monotonic() + self.patience
        while True:
            url = self.urls[self.current]
            try:
                response = self.http.request(
                    method,
                    url + path,
                    json=body,
                    headers={"Authorization": f"Bearer {self.token}"},
                )
                if response.status_code != 503:
                    return response
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline:
                raise TimeoutError(f"no server led within {self.patience} s for {method} {path}")
            self.current = (self.current + 1) % len(self.urls)
            self.switches += 1
            time.sleep(0.05)

    def close(self) -> None:
        self.http.close()


def health(url: str) -> tuple[int, Any]:
    try:
        response = httpx.get(url + "/v1/health", timeout=2)
    except httpx.TransportError as exc:
        return 0, repr(exc)
    return response.status_code, response.json()
