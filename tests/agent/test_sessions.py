"""Sessions end to end (specs/protocol.md Part D): a real server on a socket, amc's Host
Agent, the simulated device through the real executor. A caller sends actions one at a time
and waits for each outcome in the same request, as an AI agent would.
"""

from __future__ import annotations

import time
import xml.etree.ElementTree as ElementTree

import pytest

from tests.agent.helpers import shell

req = pytest.mark.req

SETTINGS = {"id": "open", "action": "launch", "args": {"package": "com.android.settings"}}


def started_session(server, **submit) -> str:
    """A session, waited until the agent dispatched it."""
    task_id = server.api.submit_session(**submit)["id"]
    server.api.wait_status(task_id, "dispatched")
    return task_id


def act(server, task_id: str, action: dict, wait: float = 20) -> dict:
    return server.api.act(task_id, action, wait=wait)


def bounds_of(xml: bytes, text: str) -> tuple[int, int]:
    """The centre of the node showing `text` in a uiautomator dump."""
    for node in ElementTree.fromstring(xml).iter("node"):
        if node.get("text") == text:
            x1, y1, x2, y2 = (int(n) for n in node.get("bounds", "").replace("][", ",").strip("[]").split(","))
            return (x1 + x2) // 2, (y1 + y2) // 2
    raise AssertionError(f"no node shows {text!r}")


def artifact_bytes(server, task_id: str, action: dict) -> bytes:
    (artifact_id,) = action["artifacts"]
    return server.api.download(task_id, artifact_id).content


@req("SESSION/s11", "SESSION/s4", "SESSION/s5", "SESSION/s8", "SESSION/s12")
def test_a_caller_drives_the_device_one_action_at_a_time(server, sim, make_agent):
    make_agent(server.url, sim.server_port)
    task_id = started_session(server)
    assert act(server, task_id, SETTINGS)["status"] == "completed"
    before = act(server, task_id, {"id": "shot1", "action": "screenshot"})
    dump = act(server, task_id, {"id": "ui1", "action": "ui_dump"})
    assert (before["status"], dump["status"]) == ("completed", "completed")
    x, y = bounds_of(artifact_bytes(server, task_id, dump), "Network & internet")
    tapped = act(server, task_id, {"id": "tap", "action": "tap", "args": {"x": x, "y": y}})
    assert tapped["status"] == "completed" and tapped["attempt"] == 1
    after = act(server, task_id, {"id": "shot2", "action": "screenshot"})
    assert artifact_bytes(server, task_id, after) != artifact_bytes(server, task_id, before)
    dump2 = act(server, task_id, {"id": "ui2", "action": "ui_dump"})
    assert b"Airplane mode" in artifact_bytes(server, task_id, dump2)
    ended = server.api.end(task_id)
    assert (ended["status"], ended["result"]["reason"]) == ("done", "session_ended")
    history = server.api.types(task_id)
    assert history.count("action_posted") == history.count("action_ended") == 6
    assert history.count("artifact_stored") == 4 and history[-1] == "ended"
    stored = {a["step"] for a in server.api.artifacts(task_id)}
    assert stored == {"shot1", "ui1", "shot2", "ui2"}


@req("SESSION/s6", "SESSION/s11")
def test_a_cancel_interrupts_a_long_shell_action_and_the_session_ends_cancelled(server, sim, make_agent):
    make_agent(server.url, sim.server_port, lease_seconds=30)  # a cancel must not wait for a renewal
    task_id = started_session(server)
    running = act(server, task_id, shell("long", "sleep 30"), wait=1)
    assert running["status"] == "delivered"
    sent = time.monotonic()
    server.api.cancel(task_id)
    ended = server.api.action(task_id, "long", wait=10)
    assert ended["status"] == "interrupted" and "cancel" in ended["reason"]
    assert time.monotonic() - sent < 5  # the poll naming it `running` heard the cancel at once
    task = server.api.wait_status(task_id, "cancelled")
    assert task["result"]["reason"] == "reported"


@req("SESSION/s11")
def test_a_policy_refusal_is_reported_refused(server, sim, make_agent):
    make_agent(server.url, sim.server_port, policy={"shell": {"deny": ["*reboot*"]}})
    task_id = started_session(server)
    refused = act(server, task_id, shell("boot", "reboot"))
    assert refused["status"] == "refused" and "reboot" in refused["reason"]
    assert act(server, task_id, shell("hi", "echo hi"))["output"].strip() == "hi"  # the session goes on


@req("SESSION/s7")
def test_a_pause_holds_the_next_action_until_resume(server, sim, make_agent):
    make_agent(server.url, sim.server_port)
    task_id = started_session(server)
    server.api.post_message(task_id, "pause")
    held = act(server, task_id, shell("hi", "echo hi"), wait=1)
    assert held["status"] == "queued"
    server.api.post_message(task_id, "resume")
    assert server.api.action(task_id, "hi", wait=10)["status"] == "completed"


@req("SESSION/s9")
def test_an_idle_session_ends_done_and_its_device_takes_the_next_task(server, sim, make_agent):
    make_agent(server.url, sim.server_port)
    task_id = started_session(server, idle_timeout_seconds=1)
    assert act(server, task_id, shell("hi", "echo hi"))["status"] == "completed"
    task = server.api.wait_status(task_id, "done")
    assert task["result"]["reason"] == "session_idle"
    following = server.api.submit({"steps": [shell("next", "echo next")]})["id"]
    assert server.api.wait_status(following, "done")["status"] == "done"


@req("SESSION/s10", "SESSION/s11")
def test_a_host_stopped_now_interrupts_the_running_action_and_releases_the_session(server, sim, make_agent):
    agent = make_agent(server.url, sim.server_port, lease_seconds=30)
    task_id = started_session(server, max_attempts=2)
    assert act(server, task_id, shell("long", "sleep 30"), wait=1)["status"] == "delivered"
    agent.stop(force=True)
    task = server.api.task(task_id)
    assert (task["status"], task["attempts"][0]["outcome"]) == ("queued", "released")
    long = server.api.action(task_id, "long")
    assert long["status"] == "interrupted" and long["attempt"] == 1
    assert "released" in server.api.types(task_id)
