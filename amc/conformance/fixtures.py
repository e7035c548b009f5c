"""Fixtures of the conformance suite: the target, its clock, and one fresh scene per test.

The target is `--target-url` with `--tokens`, or our own `amc serve` started for the run
(`target.ManagedServer`). The suite shares one server across all tests and never assumes
it is empty: each test (a `Scene`) tags its devices and its tasks' requirements with a
run tag of its own, so no test can claim another test's task, and cancels the tasks it
created when it ends.

Clock: the suite asks the admin endpoint ``POST /v1/admin/clock`` for a tiny advance. A
200 means a manual clock, and the scenarios move time exactly as they describe it; a 404
means real time, and the expiry scenarios claim short leases (2 s) and wait them out,
while scenarios that need an exact instant (E - 1 ms) are skipped with that reason.
"""

from __future__ import annotations

import subprocess
import time
import uuid
from collections.abc import Iterator
from typing import Any, cast

import pytest

from amc.conformance import plugin
from amc.conformance.client import RUN_ATTRIBUTE, Caller, Connection, Expect, Host, Lease, ms
from amc.conformance.target import ManagedServer, Tokens, TokensError, wait_healthy

REAL_TIME_LEASE = 2.0  # seconds: the lease the expiry scenarios claim without a manual clock
# The host timeout of the server the suite starts itself: short, so that the scenario of a
# silent host runs in real time too (with a manual clock it moves the clock instead).
OWN_HOST_TIMEOUT = 5.0
PROTOCOL_HOST_TIMEOUT = 60.0  # the protocol's default, assumed for a target unless told


def pytest_addoption(parser: pytest.Parser) -> None:
    plugin.add_options(parser)


def pytest_configure(config: pytest.Config) -> None:
    plugin.register(config)
    url, tokens = plugin.option(config, "--target-url"), plugin.option(config, "--tokens")
    if url and not tokens:
        raise pytest.UsageError("--target-url needs --tokens FILE (the specs/protocol.md tokens file of that server)")
    if url and tokens:  # (a URL without tokens was refused just above)
        try:
            Tokens.load(tokens)
        except TokensError as error:
            raise pytest.UsageError(str(error)) from None


# ---------------------------------------------------------------------------------------
# The target


class Target:
    """Where the server is, who may call it, and (if anyone can) how to restart it."""

    def __init__(
        self,
        url: str,
        tokens: Tokens,
        *,
        managed: ManagedServer | None = None,
        restart_command: str | None = None,
        host_timeout: float = PROTOCOL_HOST_TIMEOUT,
    ):
        self.url = url
        self.tokens = tokens
        self.managed = managed
        self.restart_command = restart_command
        self.host_timeout = host_timeout  # seconds after its latest request that a host reads offline

    @property
    def can_restart(self) -> bool:
        return self.managed is not None or bool(self.restart_command)

    def restart(self) -> None:
        """Stop the server abruptly and start it again on the same data."""
        if self.managed is not None:
            self.managed.restart()
            return
        if not self.restart_command:
            pytest.skip("restarting the target needs --restart-command CMD (or the suite's own server)")
        subprocess.run(self.restart_command, shell=True, check=True, timeout=120)
        wait_healthy(self.url, timeout=60)


@pytest.fixture(scope="session")
def target(pytestconfig: pytest.Config, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Target]:
    # pytest_configure registered the report (plugin.register), so it is there.
    report = cast(plugin.ConformanceReport, pytestconfig.pluginmanager.get_plugin(plugin.PLUGIN_NAME))
    url = plugin.option(pytestconfig, "--target-url")
    given_timeout = plugin.option(pytestconfig, "--host-timeout")
    try:
        host_timeout = None if given_timeout is None else float(given_timeout)
    except ValueError:
        raise pytest.UsageError(f"--host-timeout: seconds, not {given_timeout!r}") from None
    if url:
        tokens_file = plugin.option(pytestconfig, "--tokens")
        assert tokens_file is not None  # pytest_configure refused a URL without one
        tokens = Tokens.load(tokens_file)
        report.run.update(target=url, managed_server=False)
        yield Target(
            url.rstrip("/"),
            tokens,
            restart_command=plugin.option(pytestconfig, "--restart-command"),
            host_timeout=PROTOCOL_HOST_TIMEOUT if host_timeout is None else host_timeout,
        )
        return
    clock = plugin.option(pytestconfig, "--server-clock") or "manual"
    server = ManagedServer(
        tmp_path_factory.mktemp("amc-serve"),
        clock=clock,
        host_timeout=OWN_HOST_TIMEOUT if host_timeout is None else host_timeout,
    )
    try:
        server.start()
    except RuntimeError as error:
        pytest.exit(f"could not start amc serve for the conformance run: {error}", returncode=3)
    assert server.url is not None  # known once started
    report.run.update(target=server.url, managed_server=True)
    try:
        yield Target(server.url, Tokens.load(server.tokens_path), managed=server, host_timeout=server.host_timeout)
    finally:
        server.stop()


@pytest.fixture(scope="session")
def connection(target: Target) -> Iterator[Connection]:
    connection = Connection(target.url)
    if not connection.health():
        pytest.exit(f"{target.url}/v1/health does not answer 200: is the server running?", returncode=3)
    yield connection
    connection.close()


# ---------------------------------------------------------------------------------------
# The clock


class Clock:
    """The target's clock as the scenarios use it.

    Manual: `now()` is the server's time exactly (only the suite moves it), `advance` moves
    it, `run_out` moves it to the instant a lease expires. Real time: `advance` is a short
    pause (time moves on, no lease runs out), `run_out` sleeps until just after the expiry.
    """

    def __init__(self, admin: Caller, manual: bool, now: int | None):
        self.admin = admin
        self.manual = manual
        self._now = now
        # The lease the expiry scenarios claim: the scenario's own 30 s under a manual clock.
        self.short_lease = 30.0 if manual else REAL_TIME_LEASE

    @property
    def mode(self) -> str:
        return "manual" if self.manual else "real time"

    def need_manual(self, why: str) -> None:
        if not self.manual:
            pytest.skip(f"needs the manual clock (POST /v1/admin/clock): {why}")

    def now(self) -> int:
        """The server's time in ms (manual clock only)."""
        self.need_manual("the scenario checks exact times")
        assert self._now is not None  # a manual clock's time is known
        return self._now

    def advance(self, seconds: float) -> None:
        if self.manual:
            self._now = ms(self.admin.advance_clock(seconds)["now"])
        else:
            time.sleep(0.05)

    def advance_to(self, when: int) -> None:
        """Manual: move the clock to `when` (ms), if it is later than now."""
        self.need_manual("the scenario moves the clock to an exact instant")
        assert self._now is not None  # a manual clock's time is known
        if when > self._now:
            self._now = ms(self.admin.advance_clock(round((when - self._now) / 1000, 3))["now"])
            assert self._now == when, f"the clock moved to {self._now}, not to {when}"

    def run_out(self, lease: Lease) -> None:
        """Let `lease` expire: the clock stands at exactly its `lease_expires_at` (manual) or just past it."""
        if self.manual:
            self.advance_to(lease.expires_ms)
        else:
            time.sleep(max(0.0, lease.granted + lease.lease_seconds - time.monotonic()) + 0.3)

    def learned(self, now: int) -> None:
        """Another caller moved the manual clock to `now`."""
        self._now = now


@pytest.fixture(scope="session")
def clock(target: Target, connection: Connection, pytestconfig: pytest.Config) -> Clock:
    admin = connection.caller(target.tokens.admin, "admin")
    answer = admin.send("POST", "/v1/admin/clock", {"advance_seconds": 0.001})
    # pytest_configure registered the report (plugin.register), so it is there.
    report = cast(plugin.ConformanceReport, pytestconfig.pluginmanager.get_plugin(plugin.PLUGIN_NAME))
    if answer.status_code == 200:
        report.run.update(
            clock="manual", clock_detail="POST /v1/admin/clock moves time; scenarios run at exact instants"
        )
        return Clock(admin, True, ms(answer.json()["now"]))
    if answer.status_code == 404:
        report.run.update(
            clock="real time",
            clock_detail=f"no manual clock (404); expiry scenarios claim "
            f"{REAL_TIME_LEASE:g} s leases and wait them out",
        )
        return Clock(admin, False, None)
    pytest.fail(f"POST /v1/admin/clock answered {answer.status_code}: expected 200 (manual clock) or 404 (none)")


# ---------------------------------------------------------------------------------------
# One scene per test


class Scene:
    """The callers of one test, and a run tag that keeps its devices and tasks its own.

    acme, beta: clients of the two tenants (`.tenant` holds the real tenant names);
    admin: the admin; h1, h2: the two hosts, played by the test; spare: a third host
    token if the tokens file has one (else None).
    """

    def __init__(self, target: Target, connection: Connection, clock: Clock):
        tokens = target.tokens
        self.target = target
        self.clock = clock
        self.tag = uuid.uuid4().hex[:10]
        self.acme = connection.caller(tokens.client_a, f"client of {tokens.tenant_a}")
        self.acme.tenant = tokens.tenant_a
        self.beta = connection.caller(tokens.client_b, f"client of {tokens.tenant_b}")
        self.beta.tenant = tokens.tenant_b
        self.admin = connection.caller(tokens.admin, "admin")
        self.h1 = Host(connection.caller(tokens.host_1, f"host {tokens.host_1_id}"), tokens.host_1_id)
        self.h2 = Host(connection.caller(tokens.host_2, f"host {tokens.host_2_id}"), tokens.host_2_id)
        self.spare = None
        if tokens.spare_host and tokens.spare_host_id:  # (given together)
            self.spare = Host(
                connection.caller(tokens.spare_host, f"host {tokens.spare_host_id}"), tokens.spare_host_id
            )
        self.connection = connection

    # -- names that are this test's own -------------------------------------------------

    def serial(self, name: str) -> str:
        """A device serial unique to this test; `name` keeps its place in serial order."""
        return f"{name}.{self.tag}"

    def device(self, name: str, **attributes: str) -> dict[str, Any]:
        return {"serial": self.serial(name), "attributes": {RUN_ATTRIBUTE: self.tag, **attributes}}

    def requirements(self, serial: str | None = None, **attributes: str) -> dict[str, Any]:
        return {
            "serial": None if serial is None else self.serial(serial),
            "attributes": {RUN_ATTRIBUTE: self.tag, **attributes},
        }

    def key(self, name: str) -> str:
        """An idempotency key unique to this test."""
        return f"{name}.{self.tag}"

    def mine(self, host: dict[str, Any]) -> list[dict[str, Any]]:
        """This test's devices of a host (a shared server keeps other tests' reserved devices)."""
        return [d for d in host["devices"] if d["serial"].endswith(f".{self.tag}")]

    # -- givens -------------------------------------------------------------------------

    def submit(
        self,
        client: Caller | None = None,
        *,
        serial: str | None = None,
        attributes: dict[str, str] | None = None,
        expect: Expect = 201,
        **fields: Any,
    ) -> dict[str, Any]:
        """Submit a task that only this test's devices match."""
        fields.setdefault("requirements", self.requirements(serial, **(attributes or {})))
        return (client or self.acme).submit_task(expect=expect, **fields)

    def running(
        self,
        host: Host | None = None,
        *,
        start: bool = True,
        device: str = "emulator-5554",
        lease_seconds: float | None = None,
        client: Caller | None = None,
        **fields: Any,
    ) -> tuple[dict[str, Any], Lease]:
        """Given a task `dispatched` (or `assigned`, start=False) as attempt 1 on `host`/`device`.

        Registers `host` with that one device, submits the task, claims and starts it.
        """
        host = host or self.h1
        host.register(self.device(device))
        task = self.submit(client, **fields)
        body: dict[str, Any] = {} if lease_seconds is None else {"lease_seconds": lease_seconds}
        lease = host.claim(**body)
        assert lease is not None and lease.task_id == task["id"], "the claim must assign the task just submitted"
        if start:
            host.start(lease)
        return task, lease

    def task(self, task_id: str) -> dict[str, Any]:
        return self.admin.get_task(task_id)

    def cleanup(self) -> None:
        """Cancel what this test left queued or running, and empty the hosts' inventories."""
        for caller in (self.acme, self.beta, self.admin):
            for task_id in caller.created:
                self.admin.send("POST", f"/v1/tasks/{task_id}/cancel", {})
        for host in (self.h1, self.h2):
            host.caller.send("PUT", f"/v1/hosts/{host.id}", {"devices": []})


@pytest.fixture
def scene(target: Target, connection: Connection, clock: Clock) -> Iterator[Scene]:
    scene = Scene(target, connection, clock)
    yield scene
    scene.cleanup()


@pytest.fixture
def acme(scene: Scene) -> Caller:
    return scene.acme


@pytest.fixture
def h1(scene: Scene) -> Host:
    return scene.h1


@pytest.fixture
def h2(scene: Scene) -> Host:
    return scene.h2
