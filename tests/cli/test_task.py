"""`amc task ...` against a real server: output for people and --json, and an exit code per error."""

from __future__ import annotations

import json
import threading
import time

import pytest

from amc.cli.app import Exit
from tests.cli.conftest import ADMIN_TOKEN
from tests.support.plans import TWO_STEPS as PLAN
from tests.support.waiting import eventually


def submit(cli, plan=PLAN, *options: str) -> dict:
    result = cli("task", "submit", "-", "--json", *options, input=json.dumps(plan))
    assert result.exit_code == 0, result.stderr
    return json.loads(result.stdout)


def one_error_line(result) -> str:
    """The error output is exactly one line, starting with `Error:`."""
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: "), result.stderr
    return lines[0]


# -- submit -------------------------------------------------------------------------------------


def test_submit_a_plan_file_for_people(cli, tmp_path):
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(PLAN))
    result = cli("task", "submit", str(path))
    assert result.exit_code == 0, result.stderr
    assert "Submitted t_" in result.stdout and "queued" in result.stdout
    assert "2 steps: launch, screenshot" in result.stdout and "any device" in result.stdout
    assert "amc task watch t_" in result.stderr  # the hint goes to stderr, never into the output


@pytest.mark.req("SUBMIT/s1")
def test_submit_from_stdin_with_json_and_options(cli):
    task = submit(
        cli,
        PLAN,
        "--priority",
        "7",
        "--serial",
        "dev-9",
        "--attr",
        "model=Pixel 7",
        "--label",
        "team=qa",
        "--max-attempts",
        "2",
    )
    assert task["status"] == "queued" and task["id"].startswith("t_")
    assert task["priority"] == 7 and task["max_attempts"] == 2
    assert task["requirements"] == {"serial": "dev-9", "attributes": {"model": "Pixel 7"}}
    assert task["labels"] == {"team": "qa"} and task["tenant"] == "acme"


def test_submit_a_whole_submission_and_retry_it_with_its_idempotency_key(cli):
    body = {"plan": PLAN, "priority": 3, "idempotency_key": "nightly-1"}
    first = cli("task", "submit", "-", "--json", input=json.dumps(body))
    again = cli("task", "submit", "-", input=json.dumps(body))
    assert first.exit_code == 0 and again.exit_code == 0
    task = json.loads(first.stdout)
    assert task["priority"] == 3
    assert f"Already submitted with this idempotency key: {task['id']}" in again.stdout


@pytest.mark.req("SUBMIT/s2")
def test_an_invalid_plan_is_one_line_naming_the_step_and_exit_7(cli):
    plan = {"steps": [{"id": "tap-it", "action": "tap", "args": {"x": 1}}]}
    result = cli("task", "submit", "-", input=json.dumps(plan))
    assert result.exit_code == Exit.INVALID
    line = one_error_line(result)
    assert "tap-it" in line and "400 invalid_request" in line
    assert result.stdout == ""


@pytest.mark.parametrize(
    "text, expected",
    [
        ("{not json", "is not valid JSON"),
        ('{"steps": [], "x": NaN}', "is not valid JSON"),
        ('["a list"]', "neither a plan"),
    ],
)
def test_an_unreadable_file_is_refused_before_any_request(cli, text, expected):
    result = cli("task", "submit", "-", input=text, url="http://127.0.0.1:9")  # nothing listens there
    assert result.exit_code == Exit.INVALID
    assert expected in one_error_line(result)


def test_a_missing_file_is_one_line(cli, tmp_path):
    result = cli("task", "submit", str(tmp_path / "nope.json"))
    assert result.exit_code == Exit.INVALID
    assert "cannot read" in one_error_line(result)


# -- show, list, history ------------------------------------------------------------------------


def test_show_for_people_and_for_scripts(cli, host):
    task = submit(cli)
    lease = host.dispatch()
    host.report(lease, "done")
    people = cli("task", "show", task["id"])
    assert people.exit_code == 0, people.stderr
    for text in (task["id"], "done", "acme", "h1/dev-1", "attempts", "reported"):
        assert text in people.stdout
    scripts = cli("task", "show", task["id"], "--json")
    shown = json.loads(scripts.stdout)
    assert shown["status"] == "done" and shown["attempts"][0]["outcome"] == "done"


def test_list_filters_by_status_and_pages_through(cli, host):
    ids = [submit(cli)["id"] for _ in range(3)]
    lease = host.dispatch()  # the oldest becomes dispatched
    assert lease["task_id"] == ids[0]
    everything = json.loads(cli("task", "list", "--json").stdout)
    assert [t["id"] for t in everything["tasks"]] == ids and everything["next"] is None
    queued = json.loads(cli("task", "list", "--status", "queued", "--json").stdout)
    assert [t["id"] for t in queued["tasks"]] == ids[1:]
    first = json.loads(cli("task", "list", "--limit", "1", "--json").stdout)
    assert [t["id"] for t in first["tasks"]] == ids[:1] and first["next"]
    rest = json.loads(cli("task", "list", "--after", first["next"], "--json").stdout)
    assert [t["id"] for t in rest["tasks"]] == ids[1:]
    people = cli("task", "list")
    assert people.exit_code == 0 and all(i in people.stdout for i in ids)
    assert "dispatched" in people.stdout and "h1/dev-1" in people.stdout
    assert "No tasks with status failed." in cli("task", "list", "--status", "failed").stdout


def test_list_refuses_an_unknown_status_as_a_usage_error(cli):
    result = cli("task", "list", "--status", "running")
    assert result.exit_code == Exit.USAGE


@pytest.mark.req("HISTORY/s1")
def test_history_for_people_and_for_scripts(cli, host):
    task = submit(cli)
    lease = host.dispatch()
    host.report(lease, "done")
    events = json.loads(cli("task", "history", task["id"], "--json").stdout)["events"]
    assert [e["type"] for e in events] == ["submitted", "assigned", "dispatched", "ended"]
    assert [e["seq"] for e in events] == [1, 2, 3, 4]
    people = cli("task", "history", task["id"]).stdout
    assert "assigned attempt 1 to h1/dev-1" in people and "ended done (reported)" in people


# -- cancel -------------------------------------------------------------------------------------


@pytest.mark.req("CANCEL-QUEUED/s1")
def test_cancel_a_queued_task(cli):
    task = submit(cli)
    result = cli("task", "cancel", task["id"])
    assert result.exit_code == 0, result.stderr
    assert f"{task['id']} was still queued: it ended cancelled at once, and nothing ran." in result.stdout
    shown = json.loads(cli("task", "show", task["id"], "--json").stdout)
    assert shown["status"] == "cancelled" and shown["result"]["reason"] == "cancelled_while_queued"


@pytest.mark.req("CANCEL-INFLIGHT/s1", "CANCEL-IDEMPOTENT/s1")
def test_cancel_a_running_task_is_a_request_and_repeating_it_changes_nothing(cli, host):
    task = submit(cli)
    host.dispatch()
    result = cli("task", "cancel", task["id"], "--reason", "wrong build")
    assert result.exit_code == 0, result.stderr
    said = " ".join(result.stdout.split())
    assert "requested: attempt 1 on h1/dev-1 learns of it at its next lease renewal" in said
    assert "its running step is interrupted at once, the steps after it are reported not_started" in said
    first = json.loads(cli("task", "show", task["id"], "--json").stdout)
    assert first["status"] == "dispatched"
    assert first["cancellation"]["state"] == "pending" and first["cancellation"]["reason"] == "wrong build"
    again = json.loads(cli("task", "cancel", task["id"], "--json").stdout)
    assert again["cancellation"] == first["cancellation"]


@pytest.mark.req("CANCEL-TERMINAL/s1")
def test_cancel_a_done_task_is_409_with_its_code_and_exit_6(cli, host):
    task = submit(cli)
    host.report(host.dispatch(), "done")
    result = cli("task", "cancel", task["id"])
    assert result.exit_code == Exit.CONFLICT
    assert "409 task_terminal" in one_error_line(result)


# -- watch --------------------------------------------------------------------------------------


def test_watch_follows_a_task_until_it_ends_done(cli, host):
    task = submit(cli)

    def run_it():
        time.sleep(0.3)
        lease = host.dispatch()
        time.sleep(0.3)
        host.report(lease, "done")

    worker = threading.Thread(target=run_it)
    worker.start()
    result = cli("task", "watch", task["id"], "--interval", "0.05")
    worker.join()
    assert result.exit_code == 0, result.stderr
    lines = result.stdout.splitlines()
    order = ["submitted", "assigned attempt 1 to h1/dev-1", "dispatched", "ended done (reported)"]
    positions = [next(i for i, line in enumerate(lines) if text in line) for text in order]
    assert positions == sorted(positions)
    assert f"{task['id']} ended done (reported) on h1/dev-1, " in result.stdout


def test_watch_exits_1_when_the_task_ends_other_than_done_and_prints_it_with_json(cli):
    task = submit(cli)
    cli("task", "cancel", task["id"])
    result = cli("task", "watch", task["id"], "--json")
    assert result.exit_code == Exit.FAILED
    assert json.loads(result.stdout)["status"] == "cancelled"


def test_watch_gives_up_after_its_timeout(cli):
    task = submit(cli)
    result = cli("task", "watch", task["id"], "--timeout", "0.3", "--interval", "0.05")
    assert result.exit_code == Exit.FAILED
    assert f"{task['id']} is still queued after 0.3 s" in one_error_line(result)


def test_submit_watch_follows_the_new_task(cli, host):
    def run_it():
        lease = eventually_claim(host)
        host.report(lease, "failed")

    worker = threading.Thread(target=run_it)
    worker.start()
    result = cli("task", "submit", "-", "--watch", input=json.dumps(PLAN))
    worker.join()
    assert result.exit_code == Exit.FAILED
    assert "Submitted t_" in result.stdout and "ended failed (reported)" in result.stdout


def eventually_claim(host, timeout: float = 10.0) -> dict:
    """Claim and start the task that is about to be submitted (a claim answers 204 until then)."""
    lease = eventually(lambda: host.claim(wait_seconds=1, expect=None), timeout, what="a task to claim")
    host.start(lease)
    return lease


# -- errors -------------------------------------------------------------------------------------


def test_an_unknown_task_is_404_and_exit_5(cli):
    for command in ("show", "history", "cancel", "watch"):
        result = cli("task", command, "t_doesnotexist")
        assert result.exit_code == Exit.NOT_FOUND, (command, result.stderr)
        assert "404 not_found" in one_error_line(result)


def test_an_unknown_token_is_401_and_exit_4(cli):
    result = cli("task", "list", token="not-a-token")
    assert result.exit_code == Exit.UNAUTHORIZED
    line = one_error_line(result)
    assert "401 unauthorized" in line and "AMC_TOKEN" in line
    assert "not-a-token" not in result.stderr  # a token is never echoed


def test_a_server_that_is_not_there_is_exit_3(cli):
    import socket

    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    result = cli("task", "list", url=f"http://127.0.0.1:{port}")
    assert result.exit_code == Exit.UNREACHABLE
    line = one_error_line(result)
    assert f"cannot connect to the server at http://127.0.0.1:{port} (connection refused)" in line
    assert "amc up" in line


def test_a_url_that_is_not_http_is_exit_3(cli):
    result = cli("task", "list", url="localhost:8000")
    assert result.exit_code == Exit.UNREACHABLE
    assert "is not an http:// or https:// URL" in one_error_line(result)


def test_the_token_comes_from_the_local_tokens_file_when_none_is_given(cli, tmp_path):
    data = tmp_path / "stack"
    data.mkdir()
    (data / "tokens.json").write_text(
        json.dumps(
            [
                {"token": ADMIN_TOKEN, "role": "admin"},
                {"token": "tok-cli-tests-client-0000", "role": "client", "tenant": "acme"},
            ]
        )
    )
    task = submit(cli)
    result = cli("task", "show", task["id"], "--json", "--data", str(data), token=None)
    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout)["id"] == task["id"]
    by_env = cli("task", "show", task["id"], "--json", token=None, env={"AMC_DATA": str(data)})
    assert by_env.exit_code == 0, by_env.stderr


def test_no_token_anywhere_is_one_line_and_exit_4(cli, tmp_path):
    result = cli("task", "list", "--data", str(tmp_path / "empty"), token=None)
    assert result.exit_code == Exit.UNAUTHORIZED
    line = one_error_line(result)
    assert "no token" in line and "AMC_TOKEN" in line and "amc up" in line
