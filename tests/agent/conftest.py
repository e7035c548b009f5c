"""Fixtures for the Host Agent tests: a real server, simulated devices, agents, a real adb.

- `make_server(...)`: the control plane (create_app + uvicorn on a real socket, in a
  thread), with short leases (and, if asked, a small `--max-artifact-bytes`); `server` is the default one. Given a `data` directory it
  keeps its state in LMDB and can be restarted (`Server.restart()`, on a new port).
- `make_sim(*serials)`: a device simulator with those devices.
- `make_agent(sim, host_id, ...)`: a HostAgent on its own loop in a thread, stopped at
  teardown.
- `real_adb`: an isolated Debian adb server (own port and HOME); skipped with a reason when
  `adb` is missing, failing instead when AMC_REQUIRE_ADB=1.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import attrs
import pytest
from starlette.applications import Starlette

from amc.adapters.adb.client import BoundedClient
from amc.adapters.adb.policy import ActionPolicy
from amc.adapters.http.app import create_app
from amc.adapters.http.auth import Principal, TokenTable
from amc.adapters.http.server import ThreadedServer
from amc.adapters.http.settings import Settings
from amc.adapters.lmdb import LmdbService
from amc.agent.config import AgentConfig
from amc.service import ManualClock, MemoryService, SystemClock
from amc.sim import SimDeviceSpec, Simulator
from tests.agent.helpers import AgentThread, TcpProxy
from tests.support.http import Caller, http_client
from tests.support.realadb import real_adb  # noqa: F401  (a fixture)

CLIENT_TOKEN = "tok-agent-tests-client-000"
ADMIN_TOKEN = "tok-agent-tests-admin-0000"
HOST_TOKENS = {f"h{i}": f"tok-agent-tests-host-h{i}-0" for i in range(1, 4)}


@attrs.define
class Server:
    url: str
    port: int
    api: Caller  # a client of tenant "acme"
    admin: Caller
    threaded: ThreadedServer
    app: Callable[[], Starlette]  # a fresh app over the same store
    durable: bool

    @classmethod
    def start(cls, app: Callable[[], Starlette], durable: bool) -> Server:
        threaded = ThreadedServer(app()).start()
        return cls(
            url=threaded.url,
            port=threaded.port,
            api=Caller(http_client(threaded.url), CLIENT_TOKEN, "acme"),
            admin=Caller(http_client(threaded.url), ADMIN_TOKEN, "admin"),
            threaded=threaded,
            app=app,
            durable=durable,
        )

    def stop(self) -> None:
        self.api.http.close()
        self.admin.http.close()
        self.threaded.stop()

    def restart(self) -> None:
        """Stop the process and start a new one from the same store (its port changes)."""
        assert self.durable, "only a server with a data directory keeps its state across a restart"
        self.stop()
        fresh = Server.start(self.app, self.durable)
        self.url, self.port, self.api, self.admin, self.threaded = (
            fresh.url,
            fresh.port,
            fresh.api,
            fresh.admin,
            fresh.threaded,
        )


@pytest.fixture
def make_server():
    servers: list[Server] = []

    def make(
        lease_seconds: float = 3.0,
        manual_clock: bool = False,
        data: Path | None = None,
        host_timeout: float = 60.0,
        max_artifact_bytes: int = 16 << 20,  # amc serve's default
    ) -> Server:
        tokens = TokenTable(
            [(CLIENT_TOKEN, Principal(role="client", tenant="acme")), (ADMIN_TOKEN, Principal(role="admin"))]
            + [(token, Principal(role="host", host_id=h)) for h, token in HOST_TOKENS.items()]
        )
        settings = Settings(
            lease_seconds=lease_seconds,
            min_lease_seconds=0.5,
            manual_clock=manual_clock,
            host_timeout_seconds=host_timeout,
            max_artifact_bytes=max_artifact_bytes,
        )

        def app() -> Starlette:
            if data is not None:
                service = LmdbService.open(data, clock="manual" if manual_clock else "system")
                return create_app(service, settings, tokens=tokens, close_service=True)
            clock = ManualClock(time.time_ns() // 1_000_000) if manual_clock else SystemClock()
            return create_app(MemoryService(clock), settings, tokens=tokens)

        server = Server.start(app, durable=data is not None)
        servers.append(server)
        return server

    yield make
    for server in servers:
        server.stop()


@pytest.fixture
def server(make_server) -> Server:
    return make_server()


@pytest.fixture
def make_sim():
    sims: list[Simulator] = []

    def make(*serials: str, **spec) -> Simulator:
        sim = Simulator([SimDeviceSpec(serial=serial, **spec) for serial in serials or ("amc-sim-01",)]).start()
        sims.append(sim)
        return sim

    yield make
    for sim in sims:
        sim.stop()


@pytest.fixture
def sim(make_sim) -> Simulator:
    return make_sim("amc-sim-01")


@pytest.fixture
def make_agent(tmp_path):
    agents: list[AgentThread] = []

    def make(
        url: str,
        adb_port: int,
        host_id: str = "h1",
        *,
        lease_seconds: float | None = 1.5,
        policy: dict | None = None,
        **options,
    ) -> AgentThread:
        options.setdefault("scan_seconds", 0.2)
        options.setdefault("claim_wait_seconds", 0.5)  # the server waits out a long poll when it stops
        options.setdefault("report_backoff", (0.05, 0.5))
        config = AgentConfig(
            server=url,
            token=HOST_TOKENS[host_id],
            host_id=host_id,
            adb_port=adb_port,
            lease_seconds=lease_seconds,
            **options,
        )
        adb = BoundedClient("127.0.0.1", adb_port, io_timeout=5.0)
        agent = AgentThread(config, adb, ActionPolicy.from_dict(policy) if policy is not None else None).start()
        agents.append(agent)
        return agent

    yield make
    for agent in agents:
        agent.stop()


@pytest.fixture
def proxy_to():
    proxies: list[TcpProxy] = []

    def make(port: int) -> TcpProxy:
        proxy = TcpProxy(port)
        proxies.append(proxy)
        return proxy

    yield make
    for proxy in proxies:
        proxy.close()


# --- the real adb server -----------------------------------------------------------------
