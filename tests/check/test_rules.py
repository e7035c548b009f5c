"""The history checker catches each rule's violation, in histories recorded from a real server.

A short load (tests/support/crashload.py, no kills) runs against `amc serve` with its
clients' history recorded; the history as recorded passes. Then each test mutates the
recorded lines (or the final state) the way a faulty server would have answered, and the
checker must report that rule. (SAFETY/s2)
"""

from __future__ import annotations

import asyncio
import copy
import json
import random
from pathlib import Path
from typing import Any

import orjson
import pytest

from amc.check.final import FinalState, read_final_state
from amc.check.operations import read
from amc.check.recorder import HistoryFile
from amc.check.rules import Report, check, holdings, message_tasks, reachable
from amc.core.lifecycle import TaskStatus
from tests.support import crashload
from tests.support.served import Served

Lines = list[dict[str, Any]]
pytestmark = pytest.mark.req("SAFETY/s2")


@pytest.fixture(scope="module")
def recorded(tmp_path_factory) -> tuple[Path, FinalState]:
    """A history of 2 s of load by 6 clients and 6 hosts, and the final state after it."""
    scratch = tmp_path_factory.mktemp("recorded")
    tokens = scratch / "tokens.json"
    tokens.write_text(json.dumps(crashload.tokens_for(6)))
    history = HistoryFile(scratch / "history.jsonl")
    served = Served(scratch / "data", "--lease-seconds", str(crashload.LEASE_SECONDS), tokens=tokens)
    rng = random.Random(7)
    ledger = crashload.Ledger()
    actors = [crashload.ClientActor(i, ledger, random.Random(rng.random())) for i in range(6)]
    actors += [crashload.HostActor(i, ledger, random.Random(rng.random())) for i in range(6)]

    async def load() -> None:
        stop = asyncio.Event()
        async with crashload.async_client(served.url, history) as http:
            running = [asyncio.create_task(crashload.run_actor(a, http, stop)) for a in actors]
            await asyncio.sleep(2.0)
            stop.set()
            await asyncio.gather(*running)

    try:
        asyncio.run(load())
        operations = read([history.path]).operations
        final = read_final_state(served.url, crashload.admin_token(), message_tasks(operations))
    finally:
        served.stop()
        history.close()
    return history.path, final


def lines_of(path: Path) -> Lines:
    return [orjson.loads(raw) for raw in path.read_bytes().splitlines() if raw.strip()]


def checked(tmp_path: Path, lines: Lines, final: FinalState) -> Report:
    path = tmp_path / "mutated.jsonl"
    path.write_bytes(b"".join(orjson.dumps(line) + b"\n" for line in lines))
    return check(read([path]), final)


def rules(report: Report) -> set[str]:
    return {violation.rule for violation in report.violations}


def held_claims(lines: Lines) -> list[dict[str, Any]]:
    """The 200 claims, in order of start."""
    return sorted((x for x in lines if x.get("kind") == "claim" and x.get("status") == 200), key=lambda x: x["t0"])


def test_the_history_as_recorded_passes(recorded):
    path, final = recorded
    report = check(read([path]), final)
    assert report.ok, report.violations[:5]
    assert report.checked["acknowledged"] > 50 and report.checked["lifecycle"] > 20, report.summary()
    assert report.attempts >= 6


def test_two_hosts_holding_one_task_at_once_break_rule_one(recorded, tmp_path):
    """The second host's claim is made to name a task another host was holding then."""
    path, final = recorded
    lines = lines_of(path)
    held = {h.lease_id: h for h in holdings(read([path]).operations)}
    claims = held_claims(lines)
    first = claims[0]
    second = next(
        c
        for c in claims[1:]
        if c["host"] != first["host"]
        and c["answer"]["task_id"] != first["answer"]["task_id"]
        and held[c["answer"]["lease_id"]].intervals
        and held[c["answer"]["lease_id"]].intervals[0][0] < held[first["answer"]["lease_id"]].intervals[-1][1]
    )
    second["answer"]["task_id"] = first["answer"]["task_id"]
    second["answer"]["attempt"] = first["answer"]["attempt"] + 1
    assert "one holder" in rules(checked(tmp_path, lines, final))


def test_a_device_holding_two_attempts_at_once_breaks_rule_two(recorded, tmp_path):
    """A second claim of one host's device while its first attempt is still held."""
    path, final = recorded
    lines = lines_of(path)
    claims = held_claims(lines)
    first = claims[0]
    second = next(c for c in claims[1:] if c["host"] != first["host"])
    twin = copy.deepcopy(second)  # the same grant, but to the first claim's host and device
    twin["host"], twin["answer"]["device"] = first["host"], first["answer"]["device"]
    twin["answer"]["lease_id"] = "planted-" + twin["answer"]["lease_id"]
    twin["t0"], twin["t1"] = first["t1"] + 0.001, first["t1"] + 0.002
    report = checked(tmp_path, [*lines, twin], final)
    assert "one attempt per device" in rules(report), report.violations


def test_an_acknowledged_result_missing_from_the_final_state_breaks_rule_three(recorded, tmp_path):
    path, final = recorded
    lines = lines_of(path)
    result = next(x for x in lines if x.get("kind") == "result" and x.get("status") == 200)
    tasks = copy.deepcopy(final.tasks)
    task = tasks[result["task"]]
    task["attempts"][int(result["attempt"]) - 1]["outcome"] = None  # as if the result was lost
    report = checked(tmp_path, lines, FinalState(tasks, final.messages))
    assert rules(report) >= {"acknowledged"}, report.violations
    assert any(result["task"] in v.detail for v in report.violations)


def test_an_acknowledged_submit_missing_from_the_final_state_breaks_rule_three(recorded, tmp_path):
    path, final = recorded
    lines = lines_of(path)
    submitted = next(x for x in lines if x.get("kind") == "submit" and x.get("status") == 201)
    tasks = {k: v for k, v in final.tasks.items() if k != submitted["answer"]["id"]}
    report = checked(tmp_path, lines, FinalState(tasks, final.messages))
    assert any("submitted task" in v.detail for v in report.violations), report.violations


def test_a_start_acknowledged_after_the_task_ended_breaks_rule_four(recorded, tmp_path):
    """A start of an attempt, answered after the result that ended its task was."""
    path, final = recorded
    lines = lines_of(path)
    result = next(x for x in lines if x.get("kind") == "result" and x.get("status") == 200)
    start = next(
        x for x in lines if x.get("kind") == "start" and x.get("status") == 200 and x["task"] == result["task"]
    )
    late = copy.deepcopy(start)
    late["t0"], late["t1"] = result["t1"] + 0.001, result["t1"] + 0.002
    report = checked(tmp_path, [*lines, late], final)
    assert "lifecycle" in rules(report), report.violations


def test_a_cancelled_task_seen_queued_again_breaks_rule_four(recorded, tmp_path):
    path, final = recorded
    lines = lines_of(path)
    cancel = next(x for x in lines if x.get("kind") == "cancel" and x.get("status") == 200)
    read_again = {**cancel, "kind": "read", "method": "GET", "t0": cancel["t1"] + 1, "t1": cancel["t1"] + 1.001}
    read_again["answer"] = {**cancel["answer"], "status": "queued"}
    report = checked(tmp_path, [*lines, read_again], final)
    assert "lifecycle" in rules(report), report.violations


@pytest.mark.parametrize(
    ("before", "after", "allowed"),
    [
        (("queued", 0), ("assigned", 1), True),
        (("dispatched", 1), ("assigned", 2), True),  # expired or released, then claimed again
        (("dispatched", 2), ("assigned", 2), False),  # a new attempt would be the third
        (("done", 1), ("done", 1), True),
        (("done", 1), ("queued", 1), False),
        (("cancelled", 0), ("assigned", 1), False),
        (("assigned", 3), ("queued", 2), False),  # attempts never go down
        (("assigned", None), ("cancelled", 5), True),
    ],
)
def test_reachability_follows_the_lifecycle_table(before, after, allowed):
    assert reachable(TaskStatus(before[0]), before[1], TaskStatus(after[0]), after[1]) is allowed


def test_amc_check_history_exits_1_on_a_violation_and_0_without(recorded, tmp_path):
    from click.testing import CliRunner

    from amc.cli.check_history import check_history

    path, _ = recorded
    passed = CliRunner().invoke(check_history, [str(path)])
    assert passed.exit_code == 0, passed.output
    assert "violations: 0" in passed.output and "was not checked" in passed.output
    lines = lines_of(path)
    result = next(x for x in lines if x.get("kind") == "result" and x.get("status") == 200)
    start = next(
        x for x in lines if x.get("kind") == "start" and x.get("status") == 200 and x["task"] == result["task"]
    )
    late = {**start, "t0": result["t1"] + 0.001, "t1": result["t1"] + 0.002}
    mutated = tmp_path / "mutated.jsonl"
    mutated.write_bytes(b"".join(orjson.dumps(line) + b"\n" for line in [*lines, late]))
    failed = CliRunner().invoke(check_history, [str(mutated)])
    assert failed.exit_code == 1 and "VIOLATION [lifecycle]" in failed.output, failed.output
