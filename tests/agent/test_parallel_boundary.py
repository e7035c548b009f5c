"""Work on two devices at once, and a correction that lands while calls are in flight.

One host, two simulated devices, two tasks running in parallel (one per device). A steer
that names a call already running and one not yet admitted is applied at the next
boundary: the history's acknowledgement names that boundary, the call that had crossed it
keeps its real outcome, and only the call behind it is reported steered. The other task,
running beside it, is untouched.
"""

from __future__ import annotations

import pytest

from amc.core.times import from_rfc3339
from tests.agent.helpers import commands, echo, outcomes, shell, tap, wait_running

LONG = "sleep 3"


PLAN = {"steps": [tap("c1"), shell("c2", LONG), echo("c3")]}


@pytest.mark.req("BOUNDARY/s1")
def test_parallel_calls_that_crossed_the_boundary_keep_their_outcomes(server, make_sim, make_agent):
    sim = make_sim("dev-a", "dev-b")
    make_agent(server.url, sim.server_port, lease_seconds=1.5)
    x = server.api.submit(PLAN, requirements={"serial": "dev-a"})["id"]
    y = server.api.submit(PLAN, requirements={"serial": "dev-b"})["id"]
    wait_running(sim, "dev-a", LONG)
    wait_running(sim, "dev-b", LONG)  # both devices are inside c2 at once

    message = server.api.post_message(x, "steer", data={"skip": ["c2", "c3"]})
    done_x, done_y = server.api.wait_status(x, timeout=20), server.api.wait_status(y, timeout=20)

    # X: c1 and c2 had crossed the admission boundary; only c3 was still to be admitted.
    acknowledged = [e for e in server.api.history(x) if e["type"] == "message_acknowledged"]
    admitted = next(e for e in acknowledged if e["data"]["state"] == "admitted")
    assert admitted["data"]["message_id"] == message["id"]
    assert admitted["data"]["boundary"] == {"before_step": "c3"}
    steps = {s["id"]: s for s in done_x["result"]["steps"]}
    assert all(from_rfc3339(steps[c]["started_at"]) <= from_rfc3339(admitted["at"]) for c in ("c1", "c2"))
    assert outcomes(done_x["result"]["steps"]) == [
        ("c1", "completed", None),
        ("c2", "completed", None),
        ("c3", "not_started", "steered"),
    ]
    assert commands(sim, "dev-a") == ["input tap 10 20", LONG]
    # Y ran beside it, on the other device, and was not touched.
    assert done_y["status"] == "done" and done_y["attempts"][0]["device"] == "dev-b"
    assert [e["type"] for e in server.api.history(y) if e["type"].startswith("message")] == []
    assert commands(sim, "dev-b") == ["input tap 10 20", LONG, "echo c3"]
