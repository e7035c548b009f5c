"""Every table of the CLI fits 80 columns (and uses 132 when it has them): ids, statuses and
times stay whole on one line, only the right-most column wraps, and dates show when the time
is not today."""

from __future__ import annotations

import datetime as dt
import json

import pytest
from rich.console import Console

from amc.cli.views import (
    artifacts_table,
    attempts_table,
    history_table,
    hosts_table,
    messages_table,
    steps_table,
    task_detail,
    tasks_table,
    when,
)
from tests.cli.test_task import submit
from tests.support.plans import STEPS_ABC

WIDTHS = (80, 132)
LONG_AGO = "2026-11-29T23:00:05.123Z"  # not today, whenever the test runs after it
TASK_ID, RUNNING_ID, MESSAGE_ID = "t_6eccdffb185d78379ee8", "t_aaaaaaaaaaaaaaaaaaaa", "m_0123456789abcdef0123"

QUEUED = {
    "id": TASK_ID,
    "tenant": "acme",
    "status": "queued",
    "priority": 5,
    "max_attempts": 3,
    "labels": {"build": "1234", "suite": "smoke"},
    "requirements": {"serial": "no-such-phone", "attributes": {}},
    "plan": STEPS_ABC,
    "created_at": LONG_AGO,
    "updated_at": LONG_AGO,
    "attempt": None,
    "attempts": [],
    "cancellation": None,
    "result": None,
    "paused": False,
    "held": False,
    "waiting": {"reason": "no_device_matches", "matching_devices": 0},
}
ATTEMPT = {
    "number": 1,
    "host_id": "lab-1",
    "device": "amc-sim-01",
    "assigned_at": LONG_AGO,
    "dispatched_at": LONG_AGO,
    "lease_expires_at": LONG_AGO,
    "renewals": 12,
    "ended_at": LONG_AGO,
    "outcome": "released",
    "progress": {"step": "b", "ended": 1},
}
RUNNING = {**QUEUED, "id": RUNNING_ID, "status": "dispatched", "paused": True, "waiting": None, "attempt": 2}
RUNNING["attempts"] = [ATTEMPT, {**ATTEMPT, "number": 2, "ended_at": None, "outcome": None}]
MESSAGES = [
    {
        "id": MESSAGE_ID,
        "intent": "steer",
        "text": "the report is not needed, and neither is the upload after it",
        "data": {"skip": ["c"]},
        "state": "not_admitted",
        "attempt": 1,
        "created_at": LONG_AGO,
        "delivered_at": LONG_AGO,
        "admitted_at": None,
        "completed_at": LONG_AGO,
        "boundary": {"before_step": "a_step_with_a_long_name"},
        "detail": "the attempt ended before it reached a step boundary",
        "successor": None,
    }
]
STEPS = [
    {"id": "a", "status": "completed", "started_at": LONG_AGO, "ended_at": LONG_AGO},
    {"id": "b", "status": "interrupted", "reason": "cancelled", "started_at": LONG_AGO, "ended_at": LONG_AGO},
    {"id": "c", "status": "not_started", "reason": "cancelled"},
]
HOSTS = [
    {
        "id": "lab-1",
        "last_seen_at": LONG_AGO,
        "online": False,
        "updated_at": LONG_AGO,
        "devices": [
            {"serial": "amc-sim-01", "attributes": {"model": "Pixel 7"}, "online": False, "reservation": None},
            {
                "serial": "emulator-5554",
                "attributes": {"model": "sdk_gphone64_x86_64 with a long name"},
                "online": False,
                "reservation": {"task_id": RUNNING_ID, "attempt": 2},
            },
        ],
    }
]
ARTIFACTS = [
    {
        "id": f"a_{n:020x}",
        "task_id": RUNNING_ID,
        "attempt": n,
        "step": "a_step_with_a_long_name",
        "name": "a-screenshot-of-the-settings-screen-after-the-launch.png",
        "content_type": "application/vnd.android.ui-hierarchy+xml",
        "size": 2_345_678,
        "sha256": "0" * 64,
        "created_at": LONG_AGO,
    }
    for n in (1, 2)
]
EVENTS = [{"seq": 1, "at": LONG_AGO, "type": "submitted", "data": {"tenant": "acme", "priority": 5}}]

TABLES = {
    "tasks": lambda: tasks_table([QUEUED, RUNNING]),
    "task": lambda: task_detail(RUNNING, MESSAGES),
    "messages": lambda: messages_table(MESSAGES),
    "steps": lambda: steps_table(STEPS, [{**ARTIFACTS[0], "step": "b"}]),
    "artifacts": lambda: artifacts_table(ARTIFACTS),
    "attempts": lambda: attempts_table(RUNNING["attempts"]),
    "hosts": lambda: hosts_table(HOSTS),
    "history": lambda: history_table(EVENTS),
}
# The cells that must each stay whole on one line, whatever the width.
WHOLE = {
    "tasks": [TASK_ID, RUNNING_ID, "queued", "dispatched"],
    "task": [RUNNING_ID, MESSAGE_ID, "not_admitted", "released", "lab-1/amc-sim-01"],
    "messages": [MESSAGE_ID, "not_admitted"],
    "steps": ["completed", "interrupted", "not_started"],
    "artifacts": ["a_step_with_a_long_name", "2.2 MiB"],
    "attempts": ["released", "active", "lab-1/amc-sim-01"],
    "hosts": ["lab-1", "emulator-5554", f"{RUNNING_ID} #2"],
    "history": ["submitted"],
}


def render(renderable, width: int) -> list[str]:
    console = Console(width=width, record=True, color_system=None, file=open("/dev/null", "w"))  # noqa: SIM115
    console.print(renderable)
    return console.export_text().splitlines()


@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize("name", sorted(TABLES))
def test_every_table_fits_and_keeps_its_ids_statuses_and_dates_whole(name, width):
    lines = render(TABLES[name](), width)
    assert max(len(line.rstrip()) for line in lines) <= width, "\n".join(lines)
    for cell in WHOLE[name]:
        assert any(cell in line for line in lines), f"{cell!r} is cut or wrapped at {width}:\n" + "\n".join(lines)
    if name not in ("task", "messages", "hosts"):  # sentences, and a LAST SEEN relative to now
        assert any(when(LONG_AGO) in line for line in lines), "\n".join(lines)


def test_the_right_most_column_wraps_whole_words_at_80():
    lines = render(tasks_table([QUEUED]), 80)
    start = lines[0].index("NOTE")
    text = " ".join(line[start:].strip() for line in lines[2:])
    assert "no registered device matches serial 'no-such-phone'" in text
    assert not any(len(line.split()[-1]) == 1 for line in lines[2:] if line.strip()), "\n".join(lines)


def test_messages_keep_intent_and_boundary_readable_at_80():
    lines = render(messages_table(MESSAGES), 80)
    assert "INTENT" in lines[0] and "BOUNDARY" in lines[0]
    start = lines[0].index("INTENT")
    text = " ".join(line[start:].strip() for line in lines[2:])
    assert 'steer: skip c; "the report is not needed, and neither is the upload after it"' in text
    assert "the attempt ended before it reached a step boundary" in text


def test_times_read_as_the_time_today_and_with_the_date_otherwise():
    today = dt.date(2026, 11, 29)
    assert when("2026-11-29T23:00:05.123Z", today=today) == "23:00:05"
    assert when("2026-11-28T23:00:05.123Z", today=today) == "Nov 28 23:00"
    assert when("2025-11-29T23:00:05.123Z", today=today) == "2025-11-29"
    assert when(None) == "-"


@pytest.mark.parametrize("columns", ["80", "132"])
def test_the_commands_fit_the_terminal_width(cli, host, columns):
    task = submit(cli, STEPS_ABC, "--serial", "no-such-phone", "--label", "build=1234")
    running = submit(cli, STEPS_ABC)
    lease = host.dispatch()
    host.progress(lease, "b", 1)
    cli("task", "steer", running["id"], "--skip", "c", "--text", "the report is not needed after all")
    [steer] = host.renew(lease)["messages"]
    host.acknowledge(lease, steer["id"], "admitted", boundary={"before_step": "c"})
    env = {"COLUMNS": columns}
    for args, whole in [
        (("task", "list"), [task["id"], running["id"], "queued", "dispatched"]),
        (("task", "show", running["id"]), [running["id"], steer["id"], "h1/dev-1"]),
        (("task", "show", task["id"]), [task["id"], "queued"]),
        (("task", "messages", running["id"]), [steer["id"], "admitted", "before c"]),
        (("task", "history", running["id"]), ["assigned attempt 1 to h1/dev-1"]),
        (("host", "list"), ["h1", "dev-1", f"{running['id']} #1"]),
    ]:
        result = cli(*args, env=env)
        assert result.exit_code == 0, result.stderr
        lines = result.stdout.splitlines()
        assert max(len(line.rstrip()) for line in lines) <= int(columns), "\n".join(lines)
        for cell in whole:
            assert any(cell in line for line in lines), f"{args}: {cell!r} cut at {columns}:\n{result.stdout}"
    assert json.loads(cli("task", "list", "--json").stdout)["tasks"]  # --json is not a table
