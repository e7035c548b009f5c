"""The CLI given several server URLs (`AMC_URL=a,b`, `--server a,b`) uses the leader among them
(specs/protocol.md "High availability", HA/s5 to HA/s8).

The standby here is `tests.support.standby.Standby`, a stand-in that answers exactly the
standby contract, until the PostgreSQL store with real standbys lands (see its docstring).
The leader is the real server of `tests/cli/conftest.py`, on a real socket.
"""

from __future__ import annotations

import json
import time

import pytest

from amc.cli.app import Exit
from amc.cli.client import ApiClient, Unreachable
from tests.agent.helpers import TcpProxy
from tests.cli.conftest import CLIENT_TOKEN
from tests.cli.test_task import one_error_line
from tests.support.http import Caller, http_client
from tests.support.plans import TWO_STEPS as PLAN
from tests.support.standby import Standby
from tests.support.waiting import free_port


@pytest.fixture
def standby():
    standing = Standby()
    yield standing
    standing.stop()


@pytest.fixture
def leader(server):
    """The leader's own view, to check what the CLI's requests did there."""
    caller = Caller(http_client(server.url), CLIENT_TOKEN, "acme")
    yield caller
    caller.http.close()


@pytest.fixture
def proxy(server):
    """A relay in front of the leader that can lose a response (the request is delivered)."""
    relay = TcpProxy(server.port)
    yield relay
    relay.close()


def submitted(result) -> str:
    assert result.exit_code == 0, result.stderr
    return json.loads(result.stdout)["id"]


@pytest.mark.req("HA/s5")
def test_a_standby_first_is_passed_over_and_the_leader_answers(cli, server, standby, leader):
    urls = f"{standby.url},{server.url}"
    task_id = submitted(cli("task", "submit", "-", "--json", input=json.dumps(PLAN), url=urls))
    assert standby.refused("POST", "/v1/tasks") == 1  # refused, so it did nothing
    assert [t["id"] for t in leader.tasks()["tasks"]] == [task_id]  # created once, by the leader

    listed = cli("task", "list", "--json", url=urls)
    assert listed.exit_code == 0, listed.stderr
    assert [t["id"] for t in json.loads(listed.stdout)["tasks"]] == [task_id]
    assert standby.refused("GET", "/v1/tasks") == 1

    # --server is another name of --url, and takes the same list
    shown = cli("task", "show", task_id, "--json", "--server", urls, env={"AMC_URL": None})
    assert shown.exit_code == 0, shown.stderr
    assert json.loads(shown.stdout)["id"] == task_id


@pytest.mark.req("HA/s5")
def test_a_server_that_is_down_first_is_passed_over(cli, server, leader):
    down = f"http://127.0.0.1:{free_port()}"  # nothing listens there: connection refused
    task_id = submitted(cli("task", "submit", "-", "--json", input=json.dumps(PLAN), url=f"{down},{server.url}"))
    assert [t["id"] for t in leader.tasks()["tasks"]] == [task_id]
    cancelled = cli("task", "cancel", task_id, "--json", url=f"{down}, {server.url}/")
    assert cancelled.exit_code == 0, cancelled.stderr
    assert json.loads(cancelled.stdout)["status"] == "cancelled"


@pytest.mark.req("HA/s5")
def test_when_no_url_answers_the_error_names_each_one(cli, standby):
    down = f"http://127.0.0.1:{free_port()}"
    other = f"http://127.0.0.1:{free_port()}"
    result = cli("task", "list", url=f"{down},{other}")
    assert result.exit_code == Exit.UNREACHABLE
    line = one_error_line(result)
    assert f"cannot connect to the server at {down}" in line and f"cannot connect to the server at {other}" in line


@pytest.mark.req("HA/s6")
def test_a_message_perhaps_delivered_is_not_sent_again(cli, server, proxy, leader):
    task_id = leader.submit(PLAN)["id"]
    proxy.drop_response(b"/messages")  # the leader gets the pause; its answer is lost on the way back
    result = cli("task", "pause", task_id, url=f"{proxy.url},{server.url}")
    assert proxy.dropped == 1
    assert result.exit_code == Exit.UNREACHABLE
    line = one_error_line(result)
    assert f"no answer from the server at {proxy.url}" in line and "may or may not have taken effect" in line
    # Sent once, not again to the second URL: a second pause would be a second message.
    assert [m["intent"] for m in leader.messages(task_id)] == ["pause"]


@pytest.mark.req("HA/s6")
def test_a_cancel_or_keyed_submit_perhaps_delivered_is_sent_to_the_next_url(cli, server, proxy, leader):
    urls = f"{proxy.url},{server.url}"
    proxy.drop_response(b"idempotency_key")
    task_id = submitted(
        cli("task", "submit", "-", "--json", "--idempotency-key", "k-1", input=json.dumps(PLAN), url=urls)
    )
    assert proxy.dropped == 1
    assert [t["id"] for t in leader.tasks()["tasks"]] == [task_id]  # the repeat found the first by its key

    proxy.drop_response(b"/cancel")
    cancelled = cli("task", "cancel", task_id, "--json", url=urls)
    assert proxy.dropped == 2
    assert cancelled.exit_code == 0, cancelled.stderr
    assert json.loads(cancelled.stdout)["status"] == "cancelled"  # the repeat: 200, the task as it stands
    assert [e["type"] for e in leader.history(task_id)] == ["submitted", "cancellation_requested", "ended"]


@pytest.mark.req("HA/s8")
def test_while_only_standbys_answer_the_cli_waits_for_a_leader_pacing_itself_by_retry_after(standby, server):
    # The standby asks for 1 s between tries; the client gives up after its 2.5 s budget.
    began = time.monotonic()
    with ApiClient(standby.url, CLIENT_TOKEN, timeout=2.5) as client, pytest.raises(Unreachable) as raised:
        client.tasks()
    took = time.monotonic() - began
    assert "is a standby, not the leader" in raised.value.message
    assert 2 <= standby.refused("GET", "/v1/tasks") <= 3  # rounds 1 s apart, not a busy loop
    assert 1.0 <= took <= 4.0

    # A leader that appears during the wait is found: here it was there all along, second in the list.
    with ApiClient(f"{standby.url},{server.url}", CLIENT_TOKEN, timeout=2.5) as client:
        assert client.tasks()["tasks"] == []
        assert client.url == server.url
