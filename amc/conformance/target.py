"""The server under test: a URL and its tokens, or our own `amc serve` started for the run.

`Tokens` reads a specs/protocol.md tokens file and finds the five callers the suite needs (two
client tenants, two hosts, an admin), saying clearly which role is missing. An extra host
token, when the file has one, serves the scenarios about a host that never registered.

`ManagedServer` runs `python -m amc serve` as a subprocess on 127.0.0.1 with a temporary
data directory and a generated tokens file, waits for ``GET /v1/health``, and can kill -9
and restart it on the same port and data. `PYTHONPATH` may put another copy of amc first
(tools/mutation_check.py's deliberately broken servers).
"""

from __future__ import annotations

import json
import os
import secrets
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import httpx


class TokensError(ValueError):
    """A tokens file the suite cannot run with; the message says what is missing."""


@dataclass(frozen=True)
class Tokens:
    client_a: str
    tenant_a: str
    client_b: str
    tenant_b: str
    host_1: str
    host_1_id: str
    host_2: str
    host_2_id: str
    admin: str
    spare_host: str | None = None  # a third host token, for "a host that never registered"
    spare_host_id: str | None = None

    @classmethod
    def load(cls, path: str | Path) -> Tokens:
        try:
            entries = json.loads(Path(path).read_text())
        except OSError as error:
            raise TokensError(f"tokens file {path}: {error.strerror}") from None
        except ValueError as error:
            raise TokensError(f"tokens file {path}: not JSON ({error})") from None
        if not isinstance(entries, list) or not all(isinstance(e, dict) for e in entries):
            raise TokensError(f"tokens file {path}: expected a JSON list of objects (specs/protocol.md, Roles)")
        clients: dict[str, str] = {}  # tenant -> token
        hosts: dict[str, str] = {}  # host id -> token
        admins: list[str] = []
        for entry in entries:
            role, token = entry.get("role"), entry.get("token")
            if not isinstance(token, str) or not token:
                continue
            if role == "client" and isinstance(entry.get("tenant"), str):
                clients.setdefault(entry["tenant"], token)
            elif role == "host" and isinstance(entry.get("host_id"), str):
                hosts.setdefault(entry["host_id"], token)
            elif role == "admin":
                admins.append(token)
        missing = []
        if len(clients) < 2:
            found = f"found {len(clients)}" + (f" (tenant {', '.join(repr(t) for t in clients)})" if clients else "")
            missing.append(f"two client tokens of different tenants ({found})")
        if len(hosts) < 2:
            found = f"found {len(hosts)}" + (f" (host {', '.join(repr(h) for h in hosts)})" if hosts else "")
            missing.append(f"two host tokens of different host ids ({found})")
        if not admins:
            missing.append("an admin token (found none)")
        if missing:
            raise TokensError(
                f"tokens file {path} lacks what the conformance suite needs: "
                + "; ".join(missing)
                + '. Example entries: {"token": "...", "role": "client", "tenant": "acme"}, '
                '{"token": "...", "role": "host", "host_id": "h1"}, {"token": "...", "role": "admin"}'
            )
        (tenant_a, client_a), (tenant_b, client_b) = list(clients.items())[:2]
        (host_1_id, host_1), (host_2_id, host_2), *spare = list(hosts.items())
        spare_id, spare_token = spare[0] if spare else (None, None)
        return cls(
            client_a=client_a,
            tenant_a=tenant_a,
            client_b=client_b,
            tenant_b=tenant_b,
            host_1=host_1,
            host_1_id=host_1_id,
            host_2=host_2,
            host_2_id=host_2_id,
            admin=admins[0],
            spare_host=spare_token,
            spare_host_id=spare_id,
        )


def write_tokens(path: Path) -> Path:
    """A tokens file for our own server: tenants acme and beta, hosts h1 and h2 (and h9), an admin."""
    entries = [
        {"token": "client-acme-" + secrets.token_hex(8), "role": "client", "tenant": "acme"},
        {"token": "client-beta-" + secrets.token_hex(8), "role": "client", "tenant": "beta"},
        {"token": "host-h1-" + secrets.token_hex(8), "role": "host", "host_id": "h1"},
        {"token": "host-h2-" + secrets.token_hex(8), "role": "host", "host_id": "h2"},
        {"token": "host-h9-" + secrets.token_hex(8), "role": "host", "host_id": "h9"},
        {"token": "admin-" + secrets.token_hex(8), "role": "admin"},
    ]
    path.write_text(json.dumps(entries, indent=2))
    return path


def wait_healthy(url: str, timeout: float = 20.0, process: subprocess.Popen[bytes] | None = None) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process is not None and process.poll() is not None:
            raise RuntimeError(f"the server exited with status {process.returncode}")
        try:
            if httpx.get(f"{url}/v1/health", timeout=1.0).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.05)
    raise RuntimeError(f"{url}/v1/health did not answer 200 within {timeout:g} s")


class ManagedServer:
    """`amc serve` in a subprocess, for the duration of a run."""

    def __init__(
        self,
        workdir: Path,
        *,
        clock: str = "manual",
        pythonpath: str | Path | None = None,
        lease_seconds: float = 30,
        min_lease_seconds: float = 1,
        max_lease_seconds: float = 600,
        host_timeout: float = 60,
    ):
        self.workdir = Path(workdir)
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.data = self.workdir / "data"
        self.tokens_path = write_tokens(self.workdir / "tokens.json")
        self.log_path = self.workdir / "server.log"
        self.clock = clock
        self.pythonpath = None if pythonpath is None else str(pythonpath)
        self.options = [
            "--lease-seconds",
            f"{lease_seconds:g}",
            "--min-lease-seconds",
            f"{min_lease_seconds:g}",
            "--max-lease-seconds",
            f"{max_lease_seconds:g}",
            "--host-timeout",
            f"{host_timeout:g}",
        ]
        self.host_timeout = host_timeout
        self.port = 0
        self.url: str | None = None
        self.process: subprocess.Popen[bytes] | None = None

    def start(self, timeout: float = 30.0) -> ManagedServer:
        env = dict(os.environ)
        if self.pythonpath:
            env["PYTHONPATH"] = self.pythonpath + os.pathsep + env.get("PYTHONPATH", "")
        command = [
            sys.executable,
            "-m",
            "amc",
            "serve",
            "--data",
            str(self.data),
            "--host",
            "127.0.0.1",
            "--port",
            str(self.port),
            "--tokens",
            str(self.tokens_path),
            "--clock",
            self.clock,
            "--log-level",
            "warning",
            *self.options,
        ]
        log = self.log_path.open("a")
        log.write(f"\n$ {' '.join(command)}\n")
        log.flush()
        self.process = subprocess.Popen(
            command, stdout=log, stderr=subprocess.STDOUT, env=env, cwd=self.workdir, start_new_session=True
        )
        log.close()
        deadline = time.monotonic() + timeout
        while self.url is None or self.port == 0:
            url = self._recorded_url(self.process.pid)
            if url is not None:
                self.url = url
                self.port = int(url.rsplit(":", 1)[1])
                break
            if self.process.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"amc serve did not start; its log:\n{self.log_path.read_text()[-3000:]}")
            time.sleep(0.05)
        wait_healthy(self.url, max(1.0, deadline - time.monotonic()), self.process)
        return self

    def _recorded_url(self, pid: int) -> str | None:
        """The URL in the `server.json` that `amc serve` writes beside its tokens file, once
        the process that wrote it is `pid` (a killed server's record is left behind). The
        CLI's launcher reads the same record (`amc.cli.client.read_server_file`); the suite
        reads it itself, as it imports nothing of amc but the kernel."""
        try:
            record = json.loads((self.tokens_path.parent / "server.json").read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        if not isinstance(record, dict) or record.get("pid") != pid or not isinstance(record.get("url"), str):
            return None
        return str(record["url"]).rstrip("/")

    def kill(self) -> None:
        """kill -9: no graceful shutdown, as a crash would do."""
        if self.process is not None and self.process.poll() is None:
            os.kill(self.process.pid, signal.SIGKILL)
            self.process.wait(10)

    def restart(self) -> None:
        """kill -9, then serve the same data on the same port again."""
        self.kill()
        self.start()

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.kill()
        self.process = None

    def __enter__(self) -> ManagedServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def log_tail(self, chars: int = 3000) -> str:
        return self.log_path.read_text()[-chars:] if self.log_path.exists() else ""
