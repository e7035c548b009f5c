"""Slow and abusive clients of an amc server, run as a process of their own.

    python -m tests.support.abusers PORT SECONDS --client-token T --host-token T [counts]

For SECONDS, keeps up (each reopened as soon as the server closes it, unless said otherwise):

- `--idle N` connections that never send a byte (each reopened a second after it is closed);
- `--slowloris N` connections that trickle a request head, one byte every 0.2 s;
- `--short-body N` connections that send a submit's head with `Content-Length: 4096`, 64
  bytes of body, and then nothing;
- `--claims N` long-polling claims of one host (`wait_seconds`: `--claim-wait`, 30 by
  default), each sent again as soon as it is answered.

Then prints one JSON object: what was sent, how the server ended each kind of connection,
and the statuses the claims were answered with. In a process of its own, so that the test's
well-behaved clients share no interpreter with it; only the server is shared.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import json
import resource
import time

SLOW_HEAD = b"GET /v1/health HTTP/1.1\r\nHost: amc\r\nUser-Agent: slowloris\r\nAccept: */*\r\n\r\n"
BYTE_EVERY = 0.2


class Abuse:
    def __init__(self, port: int, seconds: float, client_token: str, host_token: str, host_id: str, claim_wait: float):
        self.port = port
        self.until = time.monotonic() + seconds
        self.client_token = client_token
        self.host_token = host_token
        self.host_id = host_id
        self.claim_wait = claim_wait
        self.counts: collections.Counter[str] = collections.Counter()

    @property
    def over(self) -> bool:
        return time.monotonic() >= self.until

    async def connect(self, kind: str) -> tuple[asyncio.StreamReader, asyncio.StreamWriter] | None:
        try:
            connection = await asyncio.open_connection("127.0.0.1", self.port)
        except OSError:
            self.counts[f"{kind}_connect_failed"] += 1
            await asyncio.sleep(0.1)
            return None
        self.counts[f"{kind}_opened"] += 1
        return connection

    async def closed_by_server(self, reader: asyncio.StreamReader, kind: str, timeout: float) -> bool:
        """Wait up to `timeout` for the server to close the connection (or answer)."""
        try:
            data = await asyncio.wait_for(reader.read(65536), timeout)
        except TimeoutError:
            return False
        except OSError:
            data = b""
        self.counts[f"{kind}_answered" if data else f"{kind}_closed"] += 1
        return True

    async def idle(self) -> None:
        while not self.over:
            connection = await self.connect("idle")
            if connection is None:
                continue
            reader, writer = connection
            await self.closed_by_server(reader, "idle", self.until - time.monotonic())
            writer.close()
            await asyncio.sleep(1.0)

    async def slowloris(self) -> None:
        while not self.over:
            connection = await self.connect("slowloris")
            if connection is None:
                continue
            reader, writer = connection
            for byte in SLOW_HEAD:
                if self.over:
                    break
                try:
                    writer.write(bytes([byte]))
                    await writer.drain()
                except OSError:  # reset by the server
                    self.counts["slowloris_closed"] += 1
                    break
                if await self.closed_by_server(reader, "slowloris", BYTE_EVERY):
                    break
            else:
                self.counts["slowloris_head_sent"] += 1
                await self.closed_by_server(reader, "slowloris", max(0.0, self.until - time.monotonic()))
            writer.close()

    async def short_body(self) -> None:
        head = (
            "POST /v1/tasks HTTP/1.1\r\nHost: amc\r\nContent-Type: application/json\r\n"
            f"Authorization: Bearer {self.client_token}\r\nContent-Length: 4096\r\n\r\n"
        ).encode()
        body = b'{"plan": {"steps": [{"id": "a", "action": "tap", "args": {"x": 1, "y": 2}}]}, "labels": {'
        while not self.over:
            connection = await self.connect("short_body")
            if connection is None:
                continue
            reader, writer = connection
            try:
                writer.write(head + body[:64])
                await writer.drain()
            except OSError:
                pass
            await self.closed_by_server(reader, "short_body", max(0.0, self.until - time.monotonic()))
            writer.close()

    async def claims(self) -> None:
        body = b'{"wait_seconds": %g}' % self.claim_wait
        request = (
            f"POST /v1/hosts/{self.host_id}/claim HTTP/1.1\r\nHost: amc\r\nContent-Type: application/json\r\n"
            f"Authorization: Bearer {self.host_token}\r\nContent-Length: {len(body)}\r\n\r\n"
        ).encode() + body
        while not self.over:
            connection = await self.connect("claim")
            if connection is None:
                continue
            reader, writer = connection
            try:
                while not self.over:
                    writer.write(request)
                    await writer.drain()
                    remaining = self.until - time.monotonic()
                    status = await asyncio.wait_for(reader.readline(), max(remaining, 0.001))
                    if not status:
                        self.counts["claim_closed"] += 1
                        break
                    self.counts[f"claim_{status.split()[1].decode()}"] += 1
                    length = 0
                    while (line := await reader.readline()) not in (b"\r\n", b""):
                        name, _, value = line.partition(b":")
                        if name.lower() == b"content-length":
                            length = int(value)
                    await reader.readexactly(length)
            except (OSError, TimeoutError, asyncio.IncompleteReadError):
                pass
            writer.close()


async def main(options: argparse.Namespace) -> dict:
    abuse = Abuse(
        options.port, options.seconds, options.client_token, options.host_token, options.host_id, options.claim_wait
    )
    workers = (
        [abuse.idle() for _ in range(options.idle)]
        + [abuse.slowloris() for _ in range(options.slowloris)]
        + [abuse.short_body() for _ in range(options.short_body)]
        + [abuse.claims() for _ in range(options.claims)]
    )
    await asyncio.gather(*workers)
    return dict(sorted(abuse.counts.items()))


def parse() -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    parser.add_argument("port", type=int)
    parser.add_argument("seconds", type=float)
    parser.add_argument("--client-token", required=True)
    parser.add_argument("--host-token", required=True)
    parser.add_argument("--host-id", required=True)
    parser.add_argument("--claim-wait", type=float, default=30.0)
    for kind in ("idle", "slowloris", "short-body", "claims"):
        parser.add_argument(f"--{kind}", type=int, default=0)
    return parser.parse_args()


if __name__ == "__main__":
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))  # thousands of connections
    options = parse()
    try:
        import uvloop

        uvloop.install()
    except ImportError:
        pass
    print(json.dumps(asyncio.run(main(options))), flush=True)
