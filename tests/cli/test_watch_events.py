"""`amc task watch` on the event stream (specs/protocol.md Part E): it looks at the task when
the stream says it changed, survives a server restart by reconnecting (and re-reading on the
reset it gets), and polls a server that has no stream."""

from __future__ import annotations

import json
import threading
import time

import httpx
import pytest

from amc.adapters.http.app import create_app
from amc.adapters.http.auth import Principal, TokenTable
from amc.adapters.http.server import ThreadedServer
from amc.adapters.http.settings import Settings
from amc.service import MemoryService, SystemClock
from tests.cli.conftest import ADMIN_TOKEN, CLIENT_TOKEN, HOST_TOKEN, FakeHost
from tests.cli.test_task import PLAN
from tests.support.waiting import eventually

TOKENS = [
    (CLIENT_TOKEN, Principal(role="client", tenant="acme")),
    (ADMIN_TOKEN, Principal(role="admin")),
    (HOST_TOKEN, Principal(role="host", host_id="h1")),
]


def lmdb_server(path, port: int = 0) -> ThreadedServer:
    from amc.adapters.lmdb import LmdbService

    app = create_app(LmdbService.open(path), Settings(), tokens=TokenTable(TOKENS), close_service=True)
    return ThreadedServer(app, port=port).start()


def submit(cli, url: str) -> dict:
    result = cli("task", "submit", "-", "--json", input=json.dumps(PLAN), url=url)
    assert result.exit_code == 0, result.stderr
    return json.loads(result.stdout)


def readers_of(server: ThreadedServer) -> int:
    return server.server._app.state.context.events.subscribers


class Watch:
    """`amc task watch ID` running in a thread; `result` once it ended."""

    def __init__(self, cli, url: str, *args: str):
        self.result = None
        self._thread = threading.Thread(target=lambda: setattr(self, "result", cli("task", "watch", *args, url=url)))
        self._thread.start()

    def join(self, timeout: float = 30.0):
        self._thread.join(timeout)
        assert self.result is not None, "the watch did not end"
        return self.result


@pytest.mark.req("EVENTS/s8", "BOUNDED/s4", "BOUNDED/s5")
@pytest.mark.parametrize("heard", ["an event before the stop", "no event before the stop"])
def test_watch_reconnects_after_the_server_restarts_and_rereads_on_the_reset(cli, tmp_path, heard):
    data = tmp_path / "data"
    server = lmdb_server(data)
    port = server.port
    try:
        task = submit(cli, server.url)
        watch = Watch(cli, server.url, task["id"], "--interval", "0.05", "--timeout", "60", "--give-up-after", "60")
        eventually(lambda: readers_of(server) == 1, what="the watch reading the stream")
        time.sleep(0.3)  # its read on the stream's opening is done
        if heard == "an event before the stop":  # it reconnects with an id of the old run: the server resets it
            headers = {"Authorization": f"Bearer {CLIENT_TOKEN}"}
            httpx.post(f"{server.url}/v1/tasks", json={"plan": PLAN}, headers=headers).raise_for_status()
            time.sleep(0.3)
        # (else it has no id to send, and resets itself)
        server.stop()
        # While the watch cannot reach it (far longer than its interval: a poll would fail),
        # the server runs elsewhere on the same data, and the task runs to its end there
        elsewhere = lmdb_server(data)
        host = FakeHost(elsewhere.url)
        try:
            host.register("dev-1")
            host.report(host.dispatch(), "done")
        finally:
            host.close()
            elsewhere.stop()
        assert watch.result is None, watch.result and watch.result.output
        # When the server is back where the watch looks, the watch reconnects, is told to
        # read again (a reset: its last event id is of another run), and sees the end
        server = lmdb_server(data, port)
        result = watch.join()
    finally:
        server.stop()
    assert result.exit_code == 0, result.output
    # While no server answered it said so, and when one did again, that too (BOUNDED/s4);
    # the task that ended meanwhile is reported ended (BOUNDED/s5)
    assert "No server answers (cannot connect to the server at" in result.stderr
    assert "trying again for up to 60 s" in result.stderr
    assert f"{server.url} answers again (after " in result.stderr
    assert "goes on" not in result.output
    lines = result.stdout.splitlines()
    order = ["submitted", "assigned attempt 1 to h1/dev-1", "dispatched", "ended done (reported)"]
    positions = [next(i for i, line in enumerate(lines) if text in line) for text in order]
    assert positions == sorted(positions)
    assert f"{task['id']} ended done (reported) on h1/dev-1, " in result.stdout


@pytest.mark.req("EVENTS/s8")
def test_watch_follows_the_stream_live(cli, tmp_path):
    server = lmdb_server(tmp_path / "data")
    host = FakeHost(server.url)
    try:
        host.register("dev-1")
        task = submit(cli, server.url)
        watch = Watch(cli, server.url, task["id"], "--interval", "5", "--timeout", "60")
        eventually(lambda: readers_of(server) == 1, what="the watch reading the stream")
        lease = host.dispatch()
        host.report(lease, "done")
        started = time.monotonic()
        result = watch.join()
        assert time.monotonic() - started < 4, "the watch waited for its interval, not for the stream"
    finally:
        host.close()
        server.stop()
    assert result.exit_code == 0, result.output
    assert f"{task['id']} ended done (reported) on h1/dev-1, " in result.stdout


@pytest.mark.req("EVENTS/s8")
def test_watch_polls_a_server_that_answers_404_for_the_stream(cli):
    app = create_app(MemoryService(SystemClock()), Settings(), tokens=TokenTable(TOKENS))
    app.router.routes[:] = [route for route in app.router.routes if getattr(route, "path", "") != "/v1/events"]
    server = ThreadedServer(app).start()
    host = FakeHost(server.url)
    try:
        host.register("dev-1")
        task = submit(cli, url=server.url)

        def run_it():
            time.sleep(0.3)
            lease = host.dispatch()
            time.sleep(0.3)
            host.report(lease, "done")

        worker = threading.Thread(target=run_it)
        worker.start()
        result = cli("task", "watch", task["id"], "--interval", "0.05", "--timeout", "20", url=server.url)
        worker.join()
    finally:
        host.close()
        server.stop()
    assert result.exit_code == 0, result.output
    assert f"{task['id']} ended done (reported) on h1/dev-1, " in result.stdout
