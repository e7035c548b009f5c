"""The server's defences against slow and abusive clients, one at a time, with small bounds
(amc.adapters.http.connections, amc.adapters.http.longpoll; specs/protocol.md "Slow and
abusive clients"). tests/adapters/http/test_abuse.py runs them all at once, at scale."""

from __future__ import annotations

import asyncio
import logging
import socket
import time

import pytest

from amc.adapters.http.app import create_app
from amc.adapters.http.auth import Principal, TokenTable
from amc.adapters.http.connections import ConnectionLimits
from amc.adapters.http.longpoll import ClaimWaits, WorkSignal
from amc.adapters.http.server import ThreadedServer
from amc.adapters.http.settings import Settings
from amc.core.commands import ClaimTask
from amc.service import MemoryService, SystemClock
from tests.support.http import Caller, http_client
from tests.support.plans import PLAN

req = pytest.mark.req

CLIENT, HOST, FLOODER = "tok-conn-client-000000000", "tok-conn-host-h1-00000000", "tok-conn-host-h2-00000000"
TOKENS = TokenTable(
    [
        (CLIENT, Principal(role="client", tenant="acme")),
        (HOST, Principal(role="host", host_id="h1")),
        (FLOODER, Principal(role="host", host_id="h2")),
    ]
)
LIMITS = ConnectionLimits(header_timeout=0.5, body_timeout=0.5, keep_alive_timeout=5, max_connections=8)


class CountingService(MemoryService):
    """A memory service that counts the claims the kernel is asked."""

    def __init__(self) -> None:
        super().__init__(SystemClock())
        self.claims = 0

    async def execute(self, command):
        if isinstance(command, ClaimTask):
            self.claims += 1
        return await super().execute(command)


@pytest.fixture
def served():
    service = CountingService()
    settings = Settings(max_waiting_claims=6, max_waiting_claims_per_host=4)
    server = ThreadedServer(create_app(service, settings, tokens=TOKENS), limits=LIMITS).start()
    server.service = service
    yield server
    server.stop()


def connect(server) -> socket.socket:
    connection = socket.create_connection(("127.0.0.1", server.port))
    connection.settimeout(5)
    return connection


def closed_within(connection: socket.socket, seconds: float) -> bool:
    """Whether the server closes `connection` (unanswered) within `seconds`."""
    connection.settimeout(seconds)
    try:
        return connection.recv(1024) == b""
    except ConnectionResetError:
        return True
    except TimeoutError:
        return False


def health(server) -> int:
    with http_client(server.url) as http:
        return http.get("/v1/health").status_code


@req("EDGE/s1")
def test_a_request_head_that_does_not_arrive_in_time_closes_its_connection(served):
    silent, slow = connect(served), connect(served)
    started = time.monotonic()
    slow.sendall(b"GET /v1/health HTTP/1.1\r\nHo")  # and no more: a slowloris head

    assert closed_within(silent, 2) and closed_within(slow, 2)
    assert 0.4 < time.monotonic() - started < 1.5
    assert health(served) == 200  # the others are served


@req("EDGE/s1")
def test_a_head_trickled_byte_by_byte_is_cut_even_though_bytes_keep_coming(served):
    slow = connect(served)
    started, cut = time.monotonic(), False
    for byte in b"GET /v1/health HTTP/1.1\r\nHost: amc\r\nUser-Agent: slowloris\r\n\r\n":
        try:
            slow.sendall(bytes([byte]))
        except OSError:
            cut = True
            break
        time.sleep(0.05)
    assert cut or closed_within(slow, 1)
    assert time.monotonic() - started < 1.5


@req("EDGE/s2")
def test_a_body_shorter_than_its_content_length_is_cut_and_changes_nothing(served, caplog):
    client = Caller(http_client(served.url), CLIENT)
    connection = connect(served)
    head = f"POST /v1/tasks HTTP/1.1\r\nHost: amc\r\nAuthorization: Bearer {CLIENT}\r\n"
    connection.sendall((head + 'Content-Type: application/json\r\nContent-Length: 200\r\n\r\n{"plan": ').encode())
    gone = connect(served)  # and one that hangs up in the middle of its body
    gone.sendall((head + 'Content-Length: 200\r\n\r\n{"plan": ').encode())
    gone.close()

    with caplog.at_level(logging.WARNING):
        assert closed_within(connection, 2)
        time.sleep(0.1)
    assert client.tasks()["tasks"] == []
    assert client.submit(PLAN)["status"] == "queued"  # and the next one is served
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR], caplog.records


@req("EDGE/s3")
def test_at_the_connection_cap_the_longest_idle_connection_makes_room(served):
    idle = [connect(served) for _ in range(LIMITS.max_connections)]
    time.sleep(0.1)  # all accepted

    assert health(served) == 200  # the cap is reached: the oldest idle one was closed for it
    assert closed_within(idle[0], 0.3)
    assert not closed_within(idle[-1], 0.1)


@req("EDGE/s3")
def test_at_the_cap_with_every_connection_busy_a_new_one_is_closed_unread(served):
    host = Caller(http_client(served.url), HOST)
    host.register("h1", ["d1"])
    waiting = []
    for serial in [f"x{i}" for i in range(LIMITS.max_connections)]:  # kinds of their own: all may wait
        connection = connect(served)
        body = f'{{"wait_seconds": 3, "devices": ["{serial}"]}}'.encode()
        request = f"POST /v1/hosts/h1/claim HTTP/1.1\r\nHost: amc\r\nAuthorization: Bearer {HOST}\r\n"
        connection.sendall(f"{request}Content-Length: {len(body)}\r\n\r\n".encode() + body)
        waiting.append(connection)
    time.sleep(0.3)  # every claim is waiting: no connection is idle
    served_claims = served.service.claims

    refused = connect(served)
    assert closed_within(refused, 1)  # closed at once, before anything was read
    assert served.service.claims == served_claims
    assert all(not closed_within(c, 0.05) for c in waiting)  # the busy ones are untouched


@req("EDGE/s4")
def test_waiting_claims_are_bounded_per_host_and_beyond_it_wait_unwoken(served):
    flooder = Caller(http_client(served.url), FLOODER)
    client = Caller(http_client(served.url), CLIENT)
    flooder.register("h2", ["d1"])
    answers: dict[int, tuple[float, int]] = {}

    async def claims():
        import httpx

        async with httpx.AsyncClient(base_url=served.url, headers={"Authorization": f"Bearer {FLOODER}"}) as http:

            async def one(i: int) -> None:
                started = time.monotonic()
                response = await http.post("/v1/hosts/h2/claim", json={"wait_seconds": 2}, timeout=10)
                answers[i] = (time.monotonic() - started, response.status_code)

            tasks = [asyncio.create_task(one(i)) for i in range(6)]
            await asyncio.sleep(0.5)  # all six wait: four woken by work, two beyond the bound
            await asyncio.to_thread(client.submit, PLAN)
            await asyncio.gather(*tasks)

    asyncio.run(claims())

    statuses = sorted(status for _, status in answers.values())
    assert statuses == [200, 204, 204, 204, 204, 204]  # one task: one assignment
    assigned = [seconds for seconds, status in answers.values() if status == 200]
    assert assigned[0] < 1.0  # a waiting claim was woken for it at once


@req("EDGE/s4")
def test_a_change_wakes_one_claim_of_a_kind_not_every_waiting_one(served):
    flooder = Caller(http_client(served.url), FLOODER)
    client = Caller(http_client(served.url), CLIENT)
    flooder.register("h2", [])  # no device: no claim of h2 can ever succeed

    async def claims():
        import httpx

        async with httpx.AsyncClient(base_url=served.url, headers={"Authorization": f"Bearer {FLOODER}"}) as http:
            tasks = [
                asyncio.create_task(http.post("/v1/hosts/h2/claim", json={"wait_seconds": 2}, timeout=10))
                for _ in range(4)
            ]
            await asyncio.sleep(0.5)
            before = served.service.claims
            for _ in range(5):
                await asyncio.to_thread(client.submit, PLAN)
            await asyncio.sleep(0.2)
            woken = served.service.claims - before
            await asyncio.gather(*tasks)
            return woken

    assert asyncio.run(claims()) <= 5  # one claim per change (not four), or none when known empty


def test_claim_waits_count_per_host_and_in_all():
    waits = ClaimWaits(total=3, per_host=2)
    assert waits.enter("h1") and waits.enter("h1") and not waits.enter("h1")
    assert waits.enter("h2") and not waits.enter("h3")
    waits.leave("h1")
    assert waits.enter("h3") and waits.waiting == 3 and waits.turned_away == 2


def test_the_turn_passes_to_the_next_claim_of_a_kind_in_order():
    async def scenario() -> list[str]:
        signal, order = WorkSignal(), []

        async def claim(name: str, hold: float) -> None:
            async with signal.first_of("kind", 5) as first:
                assert first
                order.append(name)
                await asyncio.sleep(hold)

        await asyncio.gather(claim("a", 0.05), claim("b", 0), claim("c", 0))
        async with signal.first_of("kind", 0.01) as first:  # alone again: first at once
            assert first
        return order

    assert asyncio.run(scenario()) == ["a", "b", "c"]


def test_a_closing_signal_releases_every_claim_in_line():
    async def scenario() -> list[bool]:
        signal, seen = WorkSignal(), []

        async def claim() -> None:
            async with signal.first_of("kind", 30) as first:
                seen.append(first)
                await signal.wait(signal.generation, 30)

        tasks = [asyncio.create_task(claim()) for _ in range(3)]
        await asyncio.sleep(0.01)
        signal.close()
        await asyncio.wait_for(asyncio.gather(*tasks), 2)
        return seen

    assert asyncio.run(scenario()) == [True, False, False]


@req("EDGE/s3")
def test_the_open_files_limit_is_raised_to_fit_the_cap_and_the_cap_lowered_when_it_cannot():
    import resource

    from amc.adapters.http.server import OTHER_FILES, fit_open_files

    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    if hard == resource.RLIM_INFINITY:
        pytest.skip("no hard limit on open files here")
    assert fit_open_files(100) == 100
    assert fit_open_files(hard) == hard - OTHER_FILES  # what fits under the hard limit
    assert resource.getrlimit(resource.RLIMIT_NOFILE)[0] == hard
