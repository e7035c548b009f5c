"""What the CLI says about a task while it waits and while it runs, against a real server:
why a queued task waits, the running step and how many ended, the plan as steered, what a
cancel does, Ctrl-C on watch, and errors as problem documents under --json."""

from __future__ import annotations

import json
import threading
import time

import pytest

from amc.cli.app import Exit
from tests.cli.test_task import one_error_line, submit
from tests.support.plans import STEPS_ABC


def said(result) -> str:
    """The output with rich's line breaks undone, to look for a sentence in it."""
    return " ".join(result.stdout.split())


# -- why a queued task waits --------------------------------------------------------------------


def test_submit_show_list_and_watch_say_that_no_device_matches_the_serial(cli, host):
    task = submit(cli, STEPS_ABC, "--serial", "no-such-phone")
    expected = "no registered device matches serial 'no-such-phone'"
    submitted = cli("task", "submit", "-", "--serial", "no-such-phone", input=json.dumps(STEPS_ABC))
    assert f"It waits: {expected}." in said(submitted)
    assert f"waiting {expected}" in said(cli("task", "show", task["id"]))
    assert expected in said(cli("task", "list", env={"COLUMNS": "132"}))
    watched = cli("task", "watch", task["id"], "--timeout", "0.3", "--interval", "0.1")
    assert watched.exit_code == Exit.FAILED
    assert f"queued: {expected}" in said(watched)


def test_a_task_whose_devices_are_idle_busy_or_missing_says_so(cli, host):
    first = submit(cli, STEPS_ABC)
    assert "a matching device is idle: its host's next claim takes the task" in said(cli("task", "show", first["id"]))
    host.dispatch()
    waiting = submit(cli, STEPS_ABC, "--attr", "model=Pixel 7")
    assert "the 1 device matching model 'Pixel 7' is busy with other tasks" in said(cli("task", "show", waiting["id"]))
    other = submit(cli, STEPS_ABC, "--attr", "model=Nokia 3310")
    assert "no registered device matches model 'Nokia 3310'" in said(cli("task", "show", other["id"]))


def test_a_held_task_says_a_pause_holds_it(cli):
    task = submit(cli, STEPS_ABC)
    cli("task", "pause", task["id"])
    assert f"held by a pause: no host claims it until `amc task resume {task['id']}`" in said(
        cli("task", "show", task["id"])
    )


# -- progress -----------------------------------------------------------------------------------


def test_show_and_watch_name_the_running_step_and_the_steps_ended(cli, host):
    task = submit(cli, STEPS_ABC)
    lease = host.dispatch()
    host.progress(lease, "b", 1)
    assert "step b running, 1 of 3 steps ended" in said(cli("task", "show", task["id"]))

    def finish():
        time.sleep(0.4)
        host.progress(lease, "c", 2)
        time.sleep(0.4)
        host.report(lease, "done")

    worker = threading.Thread(target=finish)
    worker.start()
    watched = cli("task", "watch", task["id"], "--interval", "0.05")
    worker.join()
    assert watched.exit_code == 0, watched.stderr
    text = said(watched)
    assert "dispatched, attempt 1 on h1/dev-1, step b running, 1 of 3 steps ended" in text
    assert "step c running, 2 of 3 steps ended" in text
    assert text.index("step b running") < text.index("step c running") < text.index("ended done (reported)")


def test_watch_shows_paused_while_the_task_is_paused_not_the_last_event(cli, host):
    task = submit(cli, STEPS_ABC)
    lease = host.dispatch()
    host.progress(lease, "a", 0)
    cli("task", "pause", task["id"])
    [pause] = host.renew(lease)["messages"]
    host.acknowledge(lease, pause["id"], "admitted", boundary={"before_step": "b"})
    watched = cli("task", "watch", task["id"], "--timeout", "0.3", "--interval", "0.1")
    assert "paused, attempt 1 on h1/dev-1, 0 of 3 steps ended" in said(watched)


def test_watch_stops_with_the_step_table_when_the_task_ends(cli, host):
    task = submit(cli, STEPS_ABC)
    lease = host.dispatch()
    steps = [{"id": s, "status": "completed"} for s in "abc"]
    host.caller.report(lease["task_id"], lease["attempt"], lease["lease_id"], "done", steps=steps)
    watched = cli("task", "watch", task["id"])
    assert watched.exit_code == 0
    assert "STEP" in watched.stdout and "OUTCOME" in watched.stdout and watched.stdout.count("completed") == 3


@pytest.mark.req("BOUNDED/s5")
def test_ctrl_c_on_watch_stops_the_watching_not_the_task_and_exits_130(cli, host, monkeypatch):
    from amc.cli import task as task_commands

    task = submit(cli, STEPS_ABC)

    def interrupted(self):
        raise KeyboardInterrupt

    monkeypatch.setattr(task_commands._Changes, "wait", interrupted)  # Ctrl-C while it waits for a change
    watched = cli("task", "watch", task["id"])
    assert watched.exit_code == 130
    assert "Aborted" not in watched.stderr
    words = " ".join(watched.stderr.split())
    # Never "the task goes on": the watch may not have heard of its end (BOUNDED/s5)
    assert f"Stopped watching {task['id']} (last seen queued); stopping the watch does not stop the task." in words
    assert "goes on" not in words
    assert f"amc task cancel {task['id']}" in words


# -- the plan as steered ------------------------------------------------------------------------


def test_show_prints_the_plan_as_steered(cli, host):
    task = submit(cli, STEPS_ABC)
    lease = host.dispatch()
    inserted = '[{"id": "shot", "action": "screenshot", "args": {}}]'
    assert cli("task", "steer", task["id"], "--skip", "c").exit_code == 0
    assert cli("task", "steer", task["id"], "--insert-after", "a", "--steps", inserted).exit_code == 0
    skip, insert = host.renew(lease)["messages"]
    host.acknowledge(lease, skip["id"], "admitted", boundary={"before_step": "b"})
    host.acknowledge(lease, insert["id"], "admitted", boundary={"before_step": "b"})
    shown = cli("task", "show", task["id"], env={"COLUMNS": "132"})
    text = said(shown)
    assert "plan as steered, 3 steps: wait, screenshot, wait" in text
    rows = [" ".join(line.split()) for line in shown.stdout.splitlines()]
    assert f"shot screenshot added by {insert['id']}" in rows
    assert f"c wait removed by {skip['id']} (not_started, steered)" in rows
    order = [next(i for i, row in enumerate(rows) if row.startswith(f"{step} ")) for step in ("a", "shot", "b", "c")]
    assert order == sorted(order)


def test_an_unsteered_plan_shows_as_submitted(cli):
    task = submit(cli, STEPS_ABC)
    text = said(cli("task", "show", task["id"]))
    assert "plan 3 steps: wait, wait, wait" in text and "as steered" not in text


# -- cancel -------------------------------------------------------------------------------------


def test_cancel_says_what_happens_to_the_running_step(cli, host):
    task = submit(cli, STEPS_ABC)
    host.dispatch()
    text = said(cli("task", "cancel", task["id"]))
    assert "learns of it at its next lease renewal" in text
    assert "its running step is interrupted at once, the steps after it are reported not_started" in text
    assert "the task ends cancelled" in text


# -- steer refused at once ----------------------------------------------------------------------


def test_steer_naming_an_unknown_step_exits_7_with_the_servers_detail(cli, host):
    task = submit(cli, STEPS_ABC)
    host.dispatch()
    result = cli("task", "steer", task["id"], "--skip", "nosuchstep")
    assert result.exit_code == Exit.INVALID
    line = one_error_line(result)
    assert "nosuchstep" in line and "400 invalid_request" in line
    assert json.loads(cli("task", "messages", task["id"], "--json").stdout)["messages"] == []


# -- errors under --json ------------------------------------------------------------------------


def problem(result) -> dict:
    assert result.stdout == ""
    document = json.loads(result.stderr)
    assert set(document) == {"type", "title", "status", "detail", "code"}
    return document


def test_json_errors_are_one_problem_document_on_stderr(cli):
    missing = problem(cli("task", "show", "t_nope", "--json"))
    assert missing["status"] == 404 and missing["code"] == "not_found" and missing["type"].endswith("not_found")


@pytest.mark.parametrize("url", ["http://127.0.0.1:9", "ftp://example.invalid"])
def test_json_connection_errors_are_problem_documents_too(cli, url):
    result = cli("task", "list", "--json", url=url)
    assert result.exit_code == Exit.UNREACHABLE
    document = problem(result)
    assert document["code"] == "unreachable" and document["status"] is None and url.split(":")[0] in document["detail"]


def test_json_local_errors_are_problem_documents_too(cli):
    result = cli("task", "submit", "-", "--json", input="not json")
    assert result.exit_code == Exit.INVALID
    assert problem(result)["code"] == "invalid_input"
