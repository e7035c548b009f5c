"""Clients never hang (specs/protocol.md "Clients never hang"): the CLI's reader of the event
stream drops a silent stream and moves to the next server (BOUNDED/s1); a long poll's
client timeout is its wait plus a margin, and a server that never answers ends the call
(BOUNDED/s2); a watch that finds no server says so and exits 3 after --give-up-after
(BOUNDED/s4)."""

from __future__ import annotations

import socket
import threading
import time

import pytest

from amc.cli.app import Exit
from amc.cli.client import ApiClient, Unreachable
from amc.cli.events import LiveEvents, ServerEvent
from amc.mcp.api import Api
from tests.cli.conftest import CLIENT_TOKEN
from tests.support.waiting import eventually, free_port


class Mute:
    """A server on a real socket that takes connections and reads requests, then either
    answers a stream's head and falls silent (`head`), or answers nothing for `delay`
    seconds and then a JSON body. `connections` counts what it accepted."""

    def __init__(self, head: bytes | None = None, delay: float = 3600.0, body: bytes = b"{}"):
        self.head, self.delay, self.body = head, delay, body
        self.connections = 0
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self._listener.getsockname()[1]}"
        self._held: list[socket.socket] = []
        self._closed = threading.Event()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while not self._closed.is_set():
            try:
                connection, _ = self._listener.accept()
            except OSError:
                return
            self.connections += 1
            self._held.append(connection)
            threading.Thread(target=self._serve, args=(connection,), daemon=True).start()

    def _serve(self, connection: socket.socket) -> None:
        try:
            connection.recv(65536)
            if self.head is not None:
                connection.sendall(self.head)
                return  # and never another byte
            if self._closed.wait(self.delay):
                return
            answer = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n" % len(self.body)
            connection.sendall(answer + self.body)
        except OSError:
            pass

    def close(self) -> None:
        self._closed.set()
        self._listener.close()
        for connection in self._held:
            connection.close()


SILENT_STREAM = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nAmc-Keep-Alive: 0.2\r\n\r\n: keep-alive\n\n"


@pytest.mark.req("BOUNDED/s1")
def test_a_stream_silent_for_twice_its_keepalive_is_dropped_and_the_next_server_read(server):
    silent = Mute(head=SILENT_STREAM)
    heard: list[ServerEvent] = []
    reader = LiveEvents([silent.url, server.url], CLIENT_TOKEN, heard.append).start()
    try:
        # The silent server's stream opened (its head said a 0.2 s keep-alive), then said nothing
        eventually(lambda: reader.drops >= 1, timeout=10, what="the silent stream dropped")
        eventually(lambda: reader.open and reader.endpoints.current == server.url, timeout=10, what="the next server")
        assert silent.connections == 1
        assert [event.type for event in heard] == ["reset", "reset"]  # read again, at each opening without an id
        # A live stream with keep-alives is not dropped
        drops = reader.drops
        time.sleep(0.5)
        assert reader.open and reader.drops == drops
    finally:
        reader.close()
        silent.close()


@pytest.mark.req("BOUNDED/s2")
def test_a_long_poll_waits_its_wait_plus_the_margin_and_a_mute_server_ends_the_call():
    slow = Mute(delay=1.5, body=b'{"action": null}')
    mute = Mute()
    try:
        client = ApiClient(slow.url, CLIENT_TOKEN, timeout=1.0)
        # The server holds the request longer than the request timeout, within its wait: answered
        assert client._call("GET", "/v1/tasks/t/actions/a1", wait=2.0) == (200, {"action": None})
        client.close()
        client = ApiClient(mute.url, CLIENT_TOKEN, timeout=0.5)
        with pytest.raises(Unreachable, match="did not answer in time"):
            client._call("GET", "/v1/tasks", wait=0.5)  # a server that never answers: the bound ends it
        assert client._http.timeout.connect is not None  # and every connection has one too
        client.close()
    finally:
        slow.close()
        mute.close()


@pytest.mark.req("BOUNDED/s2")
def test_amc_mcp_tells_its_transport_each_long_poll_wait():
    asked: list[tuple[str, float]] = []

    class Recording:
        def request(self, method, path, body=None, params=None, *, repeatable=None, wait=0.0):
            asked.append((path, wait))
            return 200, {"id": "a1", "status": "completed"}

        def read_bytes(self, path):
            raise AssertionError("not asked")

    import anyio

    api = Api(Recording())
    anyio.run(api.action, "t1", "a1", 25)
    anyio.run(api.post_action, "t1", {"id": "a1", "action": "tap"}, 99)  # capped at the protocol's 30 s
    anyio.run(api.task, "t1")
    assert asked == [("/v1/tasks/t1/actions/a1", 25.0), ("/v1/tasks/t1/actions", 30.0), ("/v1/tasks/t1", 0.0)]


@pytest.mark.req("BOUNDED/s4")
def test_a_watch_with_no_server_says_so_and_exits_3_after_give_up_after(cli):
    nowhere = f"http://127.0.0.1:{free_port()}"
    result = cli("task", "watch", "t_1", "--give-up-after", "1", "--interval", "0.1", url=nowhere)
    assert result.exit_code == Exit.UNREACHABLE, result.output
    assert f"No server answers (cannot connect to the server at {nowhere}" in result.stderr
    assert "trying again for up to 1 s" in result.stderr
    # By default it stops at once, as documented: the error alone
    result = cli("task", "watch", "t_1", url=nowhere)
    assert result.exit_code == Exit.UNREACHABLE
    assert "No server answers" not in result.stderr and "cannot connect" in result.stderr
    # `submit --watch` takes the option too (its submit, here, finds no server: nothing to watch)
    result = cli("task", "submit", "-", "--watch", "--give-up-after", "0.5", input='{"steps": []}', url=nowhere)
    assert result.exit_code == Exit.UNREACHABLE
