"""Fixtures: a real uvicorn server on 127.0.0.1 per test, and one `Caller` per token."""

from __future__ import annotations

import asyncio
import os

import httpx
import pytest

from amc.adapters.http.app import create_app
from amc.adapters.http.auth import Principal, TokenTable
from amc.adapters.http.server import ThreadedServer
from amc.adapters.http.settings import Settings
from amc.core import actions, inputs
from amc.core.times import from_rfc3339, to_rfc3339
from amc.service import ManualClock, MemoryService, SystemClock
from tests.support import http as http_support
from tests.support.http import Caller, http_client

T0 = from_rfc3339("2026-11-29T23:00:00.000Z")

TOKENS = {
    "admin": ("tok-admin-0000000000000000", Principal(role="admin")),
    "acme": ("tok-client-acme-0000000000", Principal(role="client", tenant="acme")),
    "beta": ("tok-client-beta-0000000000", Principal(role="client", tenant="beta")),
    "h1": ("tok-host-h1-00000000000000", Principal(role="host", host_id="h1")),
    "h2": ("tok-host-h2-00000000000000", Principal(role="host", host_id="h2")),
    "h3": ("tok-host-h3-00000000000000", Principal(role="host", host_id="h3")),
    "h9": ("tok-host-h9-00000000000000", Principal(role="host", host_id="h9")),
}


class Switch:
    """An ASGI app that forwards to whichever app a test installed in it.

    Starting uvicorn costs ~0.15 s and stopping it ~0.15 s; a fresh server per test would
    spend most of the suite's time there. Instead one real uvicorn server runs for the
    whole session, and each test installs a fresh app (with a fresh service) in it; the
    app's own lifespan (its expiry timer) is entered and left on the server's loop.
    """

    def __init__(self) -> None:
        self.app = None
        self.loop: asyncio.AbstractEventLoop | None = None
        self._lifespan = None

    async def __call__(self, scope, receive, send):
        if scope["type"] == "lifespan":
            self.loop = asyncio.get_running_loop()
            while True:
                message = await receive()
                kind = message["type"].removeprefix("lifespan.")
                await send({"type": f"lifespan.{kind}.complete"})
                if kind == "shutdown":
                    return
        await self.app(scope, receive, send)

    def _on_loop(self, coroutine):
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result(10)

    def install(self, app) -> None:
        async def enter():
            self._lifespan = app.router.lifespan_context(app)
            await self._lifespan.__aenter__()

        self._on_loop(enter())
        self.app = app

    def uninstall(self) -> None:
        async def leave():
            await self._lifespan.__aexit__(None, None, None)

        if self._lifespan is not None:
            self._on_loop(leave())
            self._lifespan = None


@pytest.fixture(scope="session")
def switch():
    switch = Switch()
    server = ThreadedServer(switch).start()
    switch.url = server.url
    switch.http = http_client(server.url)  # one client: making one costs ~60 ms (SSL context)
    yield switch
    switch.http.close()
    server.stop()


class Amc:
    """One app on the running server, and its callers: ``amc.acme``, ``amc.h1``, ``amc.admin`` ..."""

    def __init__(self, switch: Switch, service, settings: Settings):
        self.service = service
        self.t0 = service.clock.now()  # a manual clock stands here until a test moves it
        self.switch = switch
        self.app = create_app(service, settings, tokens=TokenTable(TOKENS.values()))
        switch.install(self.app)
        self.url = switch.url
        self.http = switch.http
        self._clients: list[httpx.Client] = []
        for name, (token, _) in TOKENS.items():
            setattr(self, name, Caller(self.http, token, name))
        self.anon = Caller(self.http, None, "anon")
        self.stranger = Caller(self.http, "tok-nobody-knows-this-one", "stranger")

    def caller(self, token: str | None, name: str = "") -> Caller:
        """A caller with a client of its own, for requests made from another thread."""
        client = http_client(self.url)
        self._clients.append(client)
        return Caller(client, token, name)

    def now(self) -> int:
        return self.service.clock.now()

    def at(self, offset_ms: int = 0) -> str:
        """The wire form of the manual clock's start + offset."""
        return to_rfc3339(self.t0 + offset_ms)

    def close(self) -> None:
        for client in self._clients:
            client.close()
        self.switch.uninstall()
        self.service.close()

    # -- common set-ups -------------------------------------------------------------------

    def claimed(
        self,
        host: str = "h1",
        serial: str = "emulator-5554",
        *,
        start: bool = False,
        plan: dict | None = None,
        client: str = "acme",
        lease_seconds: float | None = None,
        **submit,
    ) -> tuple[str, dict]:
        """Submit a task, register `host` with `serial`, claim it: (task id, assignment)."""
        task = getattr(self, client).submit(plan, **submit)
        getattr(self, host).register(host, [serial])
        claim = {} if lease_seconds is None else {"lease_seconds": lease_seconds}
        assignment = getattr(self, host).claim(host, **claim)
        assert assignment["task_id"] == task["id"], "another task was queued"
        if start:
            getattr(self, host).start(task["id"], assignment["attempt"], assignment["lease_id"])
        return task["id"], assignment


def _make(switch: Switch, clock: str = "manual", store: str = "memory", path=None, **settings) -> Amc:
    if store == "lmdb":
        from amc.adapters.lmdb import LmdbService

        service = LmdbService.open(path, clock=clock)
    else:
        service = MemoryService(ManualClock(T0) if clock == "manual" else SystemClock())
    return Amc(switch, service, Settings(manual_clock=clock == "manual", **settings))


def _stores():
    try:
        from amc.adapters.lmdb import LmdbService  # noqa: F401
    except ImportError:
        return ["memory"]
    return ["memory", "lmdb"]


# Every scenario runs on the in-memory service; AMC_HTTP_STORES=memory,lmdb runs each on
# the durable store too (test_cancellation.py always does both).
STORES = [s for s in os.environ.get("AMC_HTTP_STORES", "memory").split(",") if s in _stores()]


@pytest.fixture(params=STORES)
def amc(switch, request, tmp_path):
    server = _make(switch, store=request.param, path=tmp_path / "store")
    yield server
    server.close()


@pytest.fixture(params=_stores())
def amc_any_store(switch, request, tmp_path):
    server = _make(switch, store=request.param, path=tmp_path / "store")
    yield server
    server.close()


@pytest.fixture
def make_amc(switch, tmp_path):
    """A server with other settings (one per test): ``make_amc(clock="system", lease_seconds=...)``."""
    made = []

    def make(**options) -> Amc:
        assert not made, "one app per test"
        made.append(_make(switch, path=tmp_path / "store", **options))
        return made[-1]

    yield make
    for server in made:
        server.close()


@pytest.fixture
def fixture_action(monkeypatch):
    """An action `fixture` whose argument `file` takes an input (as `install`'s `input` will).

    The published contract (specs/openapi.yaml) does not know this action, so the answers of
    these tests are not checked against it."""
    fixture = actions.Action(forms=(actions.Form(required={"file": inputs.input_argument}),))
    monkeypatch.setitem(actions.ACTIONS, "fixture", fixture)
    monkeypatch.setattr(http_support.CONTRACT, "check", lambda *args, **kwargs: None)
