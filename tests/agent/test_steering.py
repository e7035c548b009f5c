"""Steering a running plan: the real server, the Host Agent and the device simulator.

A correction is posted while a long step runs; the agent's next renewal carries it, and the
agent applies it at the next step boundary. The simulator logs every command the device
received, so each test checks that the device saw exactly the corrected sequence, and that
the result's step outcomes and the message's acknowledgement tell the same story.
"""

from __future__ import annotations

import pytest

from tests.agent.helpers import (
    commands,
    device_commands,
    device_log,
    echo,
    eventually,
    outcomes,
    shell,
    tap,
    wait_running,
)

req = pytest.mark.req

LEASE = 1.5  # renewals every 0.5 s
LONG = "sleep 3"  # the step during which a correction is posted: several renewals long
SERIAL = "amc-sim-01"


def steer_during(server, sim, task_id: str, data: dict, serial: str = SERIAL) -> dict:
    """Post a steer while the long step runs, and wait until a renewal carried it."""
    record = wait_running(sim, serial, LONG)
    message = server.api.post_message(task_id, "steer", data=data)
    assert message["state"] == "queued" and message["delivered_at"] is None
    delivered = server.api.wait_message(task_id, message["id"], "delivered", "admitted", "rejected", "completed")
    assert delivered["delivered_at"] is not None
    # The test's premise: the renewal carried it before the long step ended.
    assert next(r for r in device_log(sim, serial) if r.seq == record.seq).end == "running", (
        "the machine was too slow: the long step ended before the correction arrived"
    )
    return message


@req("STEER/s1", "DELIVERY/s1")
def test_a_skip_is_admitted_before_the_next_step_and_the_skipped_step_never_runs(server, sim, make_agent):
    agent = make_agent(server.url, sim.server_port, lease_seconds=LEASE)
    task_id = server.api.submit({"steps": [tap("a"), shell("b", LONG), echo("c"), echo("d")]})["id"]

    message = steer_during(server, sim, task_id, {"skip": ["d"]})
    task = server.api.wait_status(task_id)

    assert task["status"] == "done"
    assert commands(sim, SERIAL) == ["input tap 10 20", LONG, "echo c"]
    assert outcomes(task["result"]["steps"]) == [
        ("a", "completed", None),
        ("b", "completed", None),
        ("c", "completed", None),
        ("d", "not_started", "steered"),
    ]
    assert task["result"]["metadata"]["steered_steps"] == {"d": message["id"]}
    settled = server.api.message(task_id, message["id"])
    assert settled["state"] == "completed" and settled["boundary"] == {"before_step": "c"}
    assert settled["delivered_at"] <= settled["admitted_at"] <= settled["completed_at"]
    acknowledged = [e["data"] for e in server.api.history(task_id) if e["type"] == "message_acknowledged"]
    assert [(e["message_id"], e["state"]) for e in acknowledged] == [
        (message["id"], "admitted"),
        (message["id"], "completed"),
    ]
    assert [(s.message_id, s.state, s.answer) for s in agent.record(task_id).acknowledgements] == [
        (message["id"], "admitted", 200),
        (message["id"], "completed", 200),
    ]


@req("STEER/s2")
def test_a_skip_of_the_running_step_is_rejected_and_the_step_keeps_its_true_outcome(server, sim, make_agent):
    make_agent(server.url, sim.server_port, lease_seconds=LEASE)
    task_id = server.api.submit({"steps": [tap("a"), shell("b", LONG), echo("c")]})["id"]

    message = steer_during(server, sim, task_id, {"skip": ["b"]})
    task = server.api.wait_status(task_id)

    assert task["status"] == "done"
    assert commands(sim, SERIAL) == ["input tap 10 20", LONG, "echo c"]
    assert device_commands(sim, SERIAL)[1] == (LONG, "completed")  # it ran to its own end
    assert outcomes(task["result"]["steps"]) == [
        ("a", "completed", None),
        ("b", "completed", None),
        ("c", "completed", None),
    ]
    rejected = server.api.message(task_id, message["id"])
    assert rejected["state"] == "rejected" and "'b' had already started" in rejected["detail"]
    assert rejected["admitted_at"] is None and rejected["boundary"] is None


@req("BOUNDARY/s2")
def test_inserted_steps_run_where_inserted_and_are_reported_in_place(server, sim, make_agent):
    make_agent(server.url, sim.server_port, lease_seconds=LEASE)
    task_id = server.api.submit({"steps": [shell("a", LONG), echo("b"), echo("c")]})["id"]

    message = steer_during(server, sim, task_id, {"insert_after": "a", "steps": [echo("a2"), echo("a3")]})
    task = server.api.wait_status(task_id)

    assert task["status"] == "done"
    assert commands(sim, SERIAL) == [LONG, "echo a2", "echo a3", "echo b", "echo c"]
    assert outcomes(task["result"]["steps"]) == [(i, "completed", None) for i in ("a", "a2", "a3", "b", "c")]
    settled = server.api.message(task_id, message["id"])
    assert settled["state"] == "completed" and settled["boundary"] == {"before_step": "b"}
    assert task["result"]["metadata"]["steered_steps"] == {"a2": message["id"], "a3": message["id"]}


@req("STEER/s3")
def test_replace_remaining_changes_only_the_steered_task(server, make_sim, make_agent):
    sim = make_sim("dev-x", "dev-y")
    make_agent(server.url, sim.server_port, lease_seconds=LEASE)
    x = server.api.submit({"steps": [shell("a", LONG), echo("b"), echo("c")]}, requirements={"serial": "dev-x"})["id"]
    y = server.api.submit({"steps": [shell("y1", LONG), echo("y2")]}, requirements={"serial": "dev-y"})["id"]
    wait_running(sim, "dev-y", LONG)
    y_before = server.api.task(y)

    message = steer_during(server, sim, x, {"replace_remaining": [shell("b2", "sleep 2")]}, serial="dev-x")
    server.api.wait_message(x, message["id"], "admitted", "completed")
    during = server.api.task(x)  # b2 runs for two seconds: X is still in flight
    done_x, done_y = server.api.wait_status(x), server.api.wait_status(y)

    # X runs b2 instead of b and c; its status, attempt, lease and cancellation are untouched
    assert commands(sim, "dev-x") == [LONG, "sleep 2"]
    assert outcomes(done_x["result"]["steps"]) == [
        ("a", "completed", None),
        ("b", "not_started", "steered"),
        ("c", "not_started", "steered"),
        ("b2", "completed", None),
    ]
    assert (during["status"], during["attempt"], during["cancellation"]) == ("dispatched", 1, None)
    assert during["attempts"][0]["outcome"] is None and during["attempts"][0]["lease_expires_at"] is not None
    assert (done_x["status"], len(done_x["attempts"]), done_x["cancellation"]) == ("done", 1, None)
    assert [e["type"] for e in server.api.history(x)] == [
        "submitted",
        "assigned",
        "dispatched",
        "message_posted",
        "message_delivered",
        "message_acknowledged",
        "message_acknowledged",
        "ended",
    ]
    # Y: untouched
    assert commands(sim, "dev-y") == [LONG, "echo y2"]
    assert done_y["plan"] == y_before["plan"] and done_y["status"] == "done" and len(done_y["attempts"]) == 1
    assert server.api.messages(y) == []
    assert outcomes(done_y["result"]["steps"]) == [("y1", "completed", None), ("y2", "completed", None)]


@req("BOUNDARY/s3")
def test_a_policy_refusal_is_refused_while_a_steered_skip_is_not_started_steered(server, sim, make_agent):
    make_agent(server.url, sim.server_port, lease_seconds=LEASE, policy={"shell": {"deny": ["*reboot*"]}})
    task_id = server.api.submit({"steps": [shell("a", LONG), shell("s", "reboot"), echo("d"), echo("e")]})["id"]

    steer_during(server, sim, task_id, {"skip": ["d"]})
    task = server.api.wait_status(task_id)

    assert task["status"] == "failed"
    steps = {s["id"]: s for s in task["result"]["steps"]}
    assert steps["s"]["status"] == "refused" and "denied by pattern" in steps["s"]["reason"]
    assert (steps["d"]["status"], steps["d"]["reason"]) == ("not_started", "steered")
    assert (steps["e"]["status"], steps["e"]["reason"]) == ("not_started", "previous_step_refused")
    assert commands(sim, SERIAL) == [LONG]  # reboot was never sent, nor d, nor e


@req("DELIVERY/s2")
@pytest.mark.parametrize("loss", ["held", "response_lost"])
def test_a_message_carried_again_is_applied_once_and_its_acknowledgement_sent_again(
    server, sim, make_agent, proxy_to, loss
):
    proxy = proxy_to(server.port)
    agent = make_agent(proxy.url, sim.server_port, lease_seconds=LEASE)
    task_id = server.api.submit({"steps": [shell("a", LONG), echo("b"), echo("c")]})["id"]
    if loss == "held":
        proxy.hold(b"/messages/")  # the acknowledgement waits on the way while renewals go on
    else:
        proxy.drop_response(b"/messages/")  # it reaches the server; its answer is lost

    message = steer_during(server, sim, task_id, {"insert_after": "a", "steps": [echo("a2")]})
    if loss == "held":
        eventually(lambda: proxy.held >= 1, 15, what="the acknowledgement held")
        held_at = server.api.task(task_id)["attempts"][0]["renewals"]
        # Renewals go on and, the message unacknowledged, carry it again under the same id.
        eventually(
            lambda: server.api.task(task_id)["attempts"][0]["renewals"] >= held_at + 3, 20, what="three more renewals"
        )
        assert server.api.message(task_id, message["id"])["state"] == "delivered"
        assert server.api.task(task_id)["status"] == "dispatched"  # the result waits for the acknowledgement
        proxy.release()
    task = server.api.wait_status(task_id)

    assert task["status"] == "done"
    assert commands(sim, SERIAL) == [LONG, "echo a2", "echo b", "echo c"]  # a2 ran once
    assert [s["id"] for s in task["result"]["steps"]] == ["a", "a2", "b", "c"]
    settled = server.api.message(task_id, message["id"])
    assert settled["state"] == "completed" and settled["boundary"] == {"before_step": "b"}
    sent = agent.record(task_id).acknowledgements
    assert [(s.state, s.answer) for s in sent] == [("admitted", 200), ("completed", 200)]
    if loss == "response_lost":
        assert proxy.dropped == 1 and sent[0].tries == 2  # sent again; the repeat changed nothing
    admitted = [
        e
        for e in server.api.history(task_id)
        if e["type"] == "message_acknowledged" and e["data"]["state"] == "admitted"
    ]
    assert len(admitted) == 1


@req("PROGRESS/s1")
def test_the_agent_sends_the_running_step_and_the_steps_ended_with_its_renewals(server, sim, make_agent):
    make_agent(server.url, sim.server_port, lease_seconds=LEASE)
    task_id = server.api.submit({"steps": [tap("a"), shell("b", LONG), echo("c")]})["id"]
    wait_running(sim, SERIAL, LONG)

    def progress() -> dict | None:
        return server.api.task(task_id)["attempts"][0]["progress"]

    assert eventually(lambda: progress() == {"step": "b", "ended": 1}, what="progress on b after a ended")
    assert server.api.wait_status(task_id)["status"] == "done"
