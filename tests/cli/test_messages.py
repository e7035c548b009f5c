"""`amc task steer|pause|resume|follow-up|messages` against a real server (specs/protocol.md Part B).

Host h1 is played by the `host` fixture (which renews and acknowledges too), so every
message state can be reached without a Host Agent.
"""

from __future__ import annotations

import json

import pytest

from amc.cli.app import Exit
from tests.cli.test_task import one_error_line, submit

FOUR = {
    "steps": [
        {"id": "a", "action": "launch", "args": {"package": "com.android.settings"}},
        {"id": "b", "action": "keyevent", "args": {"key": "KEYCODE_HOME"}},
        {"id": "c", "action": "screenshot", "args": {}},
        {"id": "d", "action": "tap", "args": {"x": 1, "y": 2}},
    ]
}
SHOT = [{"id": "shot", "action": "screenshot", "args": {}}]
NOBODY = "http://127.0.0.1:9"  # nothing listens there: a command that sent a request would exit 3
WIDE = {"COLUMNS": "250"}  # tables at full width, so a test can look for a whole cell


def run_json(cli, *args: str, input: str | None = None):
    result = cli(*args, "--json", input=input)
    assert result.exit_code == 0, result.stderr
    return json.loads(result.stdout)


def messages_of(cli, task_id: str) -> list[dict]:
    return run_json(cli, "task", "messages", task_id)["messages"]


# -- steer ----------------------------------------------------------------------------------------


def test_steer_a_running_task_for_scripts_and_people(cli, host):
    task = submit(cli, FOUR)
    host.dispatch()
    message = run_json(cli, "task", "steer", task["id"], "--skip", "c", "--skip", "d")
    assert message["id"].startswith("m_") and message["intent"] == "steer"
    assert message["data"] == {"skip": ["c", "d"]} and message["text"] is None
    assert message["state"] == "queued" and message["delivered_at"] is None
    people = cli("task", "steer", task["id"], "--skip", "c, d", "--text", "the report is not needed")
    assert people.exit_code == 0, people.stderr
    assert f'posted to {task["id"]} (queued): skip c, d; "the report is not needed"' in people.stdout
    assert "next step boundary" in people.stdout
    assert f"amc task messages {task['id']}" in people.stderr


def test_steer_sends_each_kind_of_edit_as_the_protocol_spells_it(cli, host, tmp_path):
    task = submit(cli, FOUR)
    host.dispatch()
    inserted = run_json(cli, "task", "steer", task["id"], "--insert-after", "a", "--steps", json.dumps(SHOT))
    assert inserted["data"] == {"insert_after": "a", "steps": SHOT}
    plan_file = tmp_path / "next.json"
    plan_file.write_text(json.dumps({"steps": SHOT}))  # a plan's file serves as well as a bare list
    first = run_json(cli, "task", "steer", task["id"], "--insert-first", "--steps", f"@{plan_file}")
    assert first["data"] == {"insert_after": None, "steps": SHOT}
    replaced = run_json(cli, "task", "steer", task["id"], "--replace-remaining", "@-", input=json.dumps(SHOT))
    assert replaced["data"] == {"replace_remaining": SHOT}
    words = run_json(cli, "task", "steer", task["id"], "--text", "use the dark theme")
    assert words["data"] is None and words["text"] == "use the dark theme"
    assert [m["id"] for m in messages_of(cli, task["id"])] == [inserted["id"], first["id"], replaced["id"], words["id"]]


@pytest.mark.parametrize(
    "args, code, expected",
    [
        (["task", "steer", "t_1"], Exit.USAGE, "say what to change"),
        (["task", "steer", "t_1", "--skip", ","], Exit.USAGE, "--skip: name at least one step id"),
        (["task", "steer", "t_1", "--skip", "a", "--replace-remaining", "[]"], Exit.USAGE, "one edit per steer"),
        (["task", "steer", "t_1", "--steps", "[]"], Exit.USAGE, "--steps needs --insert-after"),
        (["task", "steer", "t_1", "--insert-after", "a"], Exit.USAGE, "need --steps"),
        (["task", "steer", "t_1", "--insert-after", "a", "--insert-first", "--steps", "[]"], Exit.USAGE, "give one"),
        (
            ["task", "steer", "t_1", "--insert-first", "--steps", "[{not json"],
            Exit.INVALID,
            "--steps is not valid JSON",
        ),
        (
            ["task", "steer", "t_1", "--replace-remaining", "[NaN]"],
            Exit.INVALID,
            "--replace-remaining is not valid JSON",
        ),
        (["task", "steer", "t_1", "--replace-remaining", '"open"'], Exit.INVALID, "neither a list of steps"),
        (
            ["task", "steer", "t_1", "--replace-remaining", "@missing.json"],
            Exit.INVALID,
            "--replace-remaining (missing.json): cannot read it",
        ),
        (["task", "follow-up", "t_1"], Exit.USAGE, "say what to do next"),
        (["task", "follow-up", "t_1", "--steps", "{'id': 1}"], Exit.INVALID, "--steps is not valid JSON"),
    ],
)
def test_bad_options_are_one_line_and_send_nothing(cli, args, code, expected):
    result = cli(*args, url=NOBODY)
    assert result.exit_code == code, result.stderr
    assert expected in one_error_line(result)
    assert result.stdout == ""


def test_the_server_refuses_an_edit_it_cannot_take_with_exit_7(cli):
    stages = {"stages": [{"id": "one", "steps": FOUR["steps"][:2]}]}
    task = submit(cli, stages)
    result = cli("task", "steer", task["id"], "--skip", "b")
    assert result.exit_code == Exit.INVALID
    assert "400 invalid_request" in one_error_line(result)
    words = run_json(cli, "task", "steer", task["id"], "--text", "words are fine for stages")
    assert words["state"] == "queued"


@pytest.mark.req("FOLLOWUP/s2")
def test_messages_to_an_ended_task_are_409_task_terminal_with_exit_6(cli):
    task = submit(cli)
    cli("task", "cancel", task["id"])
    for args in (["steer", "--text", "x"], ["pause"], ["resume"], ["follow-up", "--text", "x"]):
        result = cli("task", args[0], task["id"], *args[1:])
        assert result.exit_code == Exit.CONFLICT, (args, result.stderr)
        assert "409 task_terminal" in one_error_line(result)


def test_an_unknown_task_is_404_and_exit_5_for_every_message_command(cli):
    for args in (["steer", "--text", "x"], ["pause"], ["resume"], ["follow-up", "--text", "x"], ["messages"]):
        result = cli("task", args[0], "t_doesnotexist", *args[1:])
        assert result.exit_code == Exit.NOT_FOUND, (args, result.stderr)
        assert "404 not_found" in one_error_line(result)


# -- what became of a message ---------------------------------------------------------------------


@pytest.mark.req("DELIVERY/s1")
def test_messages_show_each_state_with_its_own_time_and_boundary(cli, host):
    task = submit(cli, FOUR)
    lease = host.dispatch()
    assert cli("task", "messages", task["id"]).stdout.strip() == f"No messages on {task['id']}."
    message = run_json(cli, "task", "steer", task["id"], "--skip", "d")
    carried = host.renew(lease)["messages"]
    assert [m["id"] for m in carried] == [message["id"]]
    [delivered] = messages_of(cli, task["id"])
    assert delivered["state"] == "delivered" and delivered["delivered_at"] and delivered["admitted_at"] is None
    host.acknowledge(lease, message["id"], "admitted", boundary={"before_step": "c"})
    [admitted] = messages_of(cli, task["id"])
    assert admitted["state"] == "admitted" and admitted["boundary"] == {"before_step": "c"}
    host.acknowledge(lease, message["id"], "completed")
    [completed] = messages_of(cli, task["id"])
    assert completed["state"] == "completed" and completed["completed_at"] >= completed["admitted_at"]

    table = cli("task", "messages", task["id"], env=WIDE).stdout
    for text in ("MESSAGE", "BOUNDARY", message["id"], "steer: skip d", "completed", "before c"):
        assert text in table, table
    history = cli("task", "history", task["id"]).stdout
    for text in (
        f"steer message {message['id']} posted",
        f"message {message['id']} delivered to attempt 1's host",
        f"message {message['id']} admitted before c by attempt 1's host",
    ):
        assert text in history, history
    shown = cli("task", "show", task["id"], env=WIDE).stdout
    assert "messages" in shown and message["id"] in shown and "before c" in shown


def test_a_rejected_steer_shows_the_hosts_detail(cli, host):
    task = submit(cli, FOUR)
    lease = host.dispatch()
    message = run_json(cli, "task", "steer", task["id"], "--skip", "a")
    host.renew(lease)
    host.acknowledge(lease, message["id"], "rejected", detail="step 'a' had already started")
    [rejected] = messages_of(cli, task["id"])
    assert rejected["state"] == "rejected" and rejected["detail"] == "step 'a' had already started"
    table = cli("task", "messages", task["id"], env=WIDE).stdout
    assert "rejected" in table and "step 'a' had already started" in table


# -- pause and resume -----------------------------------------------------------------------------


@pytest.mark.req("PAUSE/s2")
def test_a_paused_queued_task_is_held_until_resumed_and_keeps_its_place(cli, host):
    first = submit(cli)
    pause = cli("task", "pause", first["id"], "--text", "wait for the new build")
    assert pause.exit_code == 0, pause.stderr
    assert "is queued, so the server applied it at once: held" in pause.stdout
    shown = run_json(cli, "task", "show", first["id"])
    assert shown["held"] is True and shown["paused"] is False and shown["status"] == "queued"
    assert "held by a pause" in cli("task", "list").stdout
    assert "no host claims it until a resume" in cli("task", "show", first["id"]).stdout
    assert host.claim(expect=204) is None
    [message] = messages_of(cli, first["id"])
    assert message["intent"] == "pause" and message["state"] == "completed"
    assert message["text"] == "wait for the new build"

    second = submit(cli)
    resume = run_json(cli, "task", "resume", first["id"])
    assert resume["state"] == "completed" and resume["detail"].startswith("released")
    assert run_json(cli, "task", "show", first["id"])["held"] is False
    assert host.claim()["task_id"] == first["id"]  # ahead of the task submitted after it
    assert run_json(cli, "task", "show", second["id"])["status"] == "queued"


@pytest.mark.req("PAUSE/s1")
def test_a_paused_running_task_reads_paused_until_its_resume_is_admitted(cli, host):
    task = submit(cli, FOUR)
    lease = host.dispatch()
    said = cli("task", "pause", task["id"])
    assert said.exit_code == 0, said.stderr
    assert "starts no new step from its next step boundary on, and keeps the lease" in said.stdout
    [pause] = host.renew(lease)["messages"]
    host.acknowledge(lease, pause["id"], "admitted", boundary={"before_step": "b"})
    shown = run_json(cli, "task", "show", task["id"])
    assert shown["paused"] is True and shown["held"] is False and shown["status"] == "dispatched"
    renewed = host.renew(lease)
    assert renewed["messages"] == [] and renewed["cancel_requested"] is False  # reading changed nothing
    people = cli("task", "show", task["id"]).stdout
    assert "dispatched (paused)" in people and "before b" in people
    assert "paused: no new step starts until a resume" in cli("task", "list").stdout

    resume = run_json(cli, "task", "resume", task["id"])
    assert resume["state"] == "queued"
    assert run_json(cli, "task", "show", task["id"])["paused"] is True  # until the host admits the resume
    [carried] = host.renew(lease)["messages"]
    assert carried["id"] == resume["id"]
    host.acknowledge(lease, resume["id"], "admitted", boundary={"before_step": "b"})
    assert run_json(cli, "task", "show", task["id"])["paused"] is False
    assert [m["state"] for m in messages_of(cli, task["id"])] == ["admitted", "admitted"]


# -- follow-ups -----------------------------------------------------------------------------------


@pytest.mark.req("FOLLOWUP/s1", "COLLECT/s1")
def test_follow_ups_become_one_successor_that_names_who_asked_what(cli, host):
    task = submit(cli, FOUR, "--attr", "model=Pixel 7")
    lease = host.dispatch()
    words = cli("task", "follow-up", task["id"], "--text", "open Wi-Fi settings")
    assert words.exit_code == 0, words.stderr
    assert f"it waits on {task['id']}; when that ends done" in words.stdout
    shot = run_json(cli, "task", "follow-up", task["id"], "--text", "take a screenshot", "--steps", json.dumps(SHOT))
    m1 = messages_of(cli, task["id"])[0]["id"]
    host.report(lease, "done")

    successor = run_json(cli, "task", "show", f"{task['id']}.1")
    assert successor["status"] == "queued" and successor["follow_up_of"] == task["id"]
    assert successor["collected"] == [m1, shot["id"]]
    assert successor["requirements"] == {"serial": None, "attributes": {"model": "Pixel 7"}}
    assert [s["id"] for s in successor["plan"]["steps"]] == [f"{shot['id']}.shot"]
    assert [f["text"] for f in successor["follow_ups"]] == ["open Wi-Fi settings", "take a screenshot"]
    people = cli("task", "show", successor["id"], env=WIDE).stdout
    for text in (
        f"{task['id']}, collecting {m1}, {shot['id']}",
        '"open Wi-Fi settings"',
        '1 step (shot); "take a screenshot"',
    ):
        assert text in people, people
    table = cli("task", "messages", task["id"], env=WIDE).stdout
    assert table.count(f"collected into {successor['id']}") == 2, table

    later = cli("task", "follow-up", task["id"], "--text", "and once more", env=WIDE)
    assert later.exit_code == 0, later.stderr
    assert f"{task['id']} had ended done, so its successor {task['id']}.2 starts at once." in later.stdout
    assert f"amc task watch {task['id']}.2" in later.stderr
    assert run_json(cli, "task", "show", f"{task['id']}.2")["collected"] == [messages_of(cli, task["id"])[-1]["id"]]
