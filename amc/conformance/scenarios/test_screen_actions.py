"""The on-screen actions' arguments (UI, specs/requirements/screen-actions.md; specs/protocol.md,
Plan v1.2 and Selectors).

A server checks every v1.2 action where it checks any step: at submit, at a session action's
post, and in a steer's or a follow-up's steps. A bad one is 400 `invalid_request` whose
`detail` names the step and the argument, and nothing is created or recorded. Running the
actions is the Host Agent's part; these scenarios need no device.
"""

from __future__ import annotations

from typing import Any

import pytest

from amc.conformance.client import PLAN

LOGIN = {"text": "Log in"}

# Every v1.2 action, with every form and optional argument, in one plan a server must accept.
GOOD_STEPS: list[dict[str, Any]] = [
    {"id": "tap-point", "action": "tap", "args": {"x": 10, "y": 20}},
    {"id": "tap-text", "action": "tap", "args": {"target": LOGIN}},
    {"id": "tap-nth", "action": "tap", "args": {"target": {"text_contains": "item", "nth": 2}}},
    {"id": "tap-index", "action": "tap", "args": {"target": {"index": 4}}},
    {"id": "double", "action": "double_tap", "args": {"target": {"description": "Double-tap me"}}},
    {"id": "press", "action": "long_press", "args": {"target": {"resource_id": "row"}, "duration_ms": 800}},
    {"id": "press-point", "action": "long_press", "args": {"x": 5, "y": 6}},
    {"id": "swipe-points", "action": "swipe", "args": {"x1": 1, "y1": 2, "x2": 3, "y2": 4, "duration_ms": 100}},
    {"id": "swipe-way", "action": "swipe", "args": {"direction": "left", "target": {"class": "ViewPager"}}},
    {"id": "scroll", "action": "scroll", "args": {"direction": "down", "target": {"resource_id": "list"}}},
    {
        "id": "find",
        "action": "scroll_until_visible",
        "args": {"target": {"text": "Item 40"}, "direction": "down", "max_swipes": 20},
    },
    {"id": "back", "action": "back"},
    {"id": "home", "action": "home", "args": {}},
    {"id": "enter", "action": "enter"},
    {"id": "type", "action": "type", "args": {"text": "alice", "target": {"class": "EditText"}, "clear": True}},
    {"id": "type-empty", "action": "type", "args": {"text": "", "clear": True}},
    {"id": "wait", "action": "wait_for", "args": {"target": {"text": "Ready"}, "timeout_seconds": 5}},
    {"id": "gone", "action": "wait_for", "args": {"target": {"text": "Loading"}, "gone": True}},
    {"id": "idle", "action": "wait_for_idle", "args": {"quiet_ms": 500, "timeout_seconds": 10}},
    {"id": "seen", "action": "assert_visible", "args": {"target": LOGIN}},
    {"id": "unseen", "action": "assert_not_visible", "args": {"target": {"text_contains": "error"}}},
    {"id": "stop", "action": "stop_app", "args": {"package": "com.example.app"}},
    {"id": "clear", "action": "clear_app_data", "args": {"package": "com.example.app"}},
    {"id": "url", "action": "open_url", "args": {"url": "https://example.com/"}},
    {"id": "turn", "action": "set_orientation", "args": {"orientation": "landscape"}},
    {"id": "apps", "action": "list_apps", "args": {"third_party": True}},
    {
        "id": "shot",
        "action": "screenshot",
        "args": {"scale": 0.5, "format": "webp", "quality": 70, "marks": True, "settle": False},
    },
    {"id": "tree", "action": "ui_tree", "args": {"diff": True}},
    {"id": "dump", "action": "ui_dump", "args": {"settle": True}},
]

# (case, step, the argument the detail must name)
BAD_STEPS: dict[str, tuple[dict[str, Any], str]] = {
    "selector with a point": ({"action": "tap", "args": {"x": 1, "y": 2, "target": LOGIN}}, "target"),
    "selector with points": (
        {"action": "swipe", "args": {"x1": 1, "y1": 2, "x2": 3, "y2": 4, "target": LOGIN}},
        "target",
    ),
    "direction with points": (
        {"action": "swipe", "args": {"x1": 1, "y1": 2, "x2": 3, "y2": 4, "direction": "up"}},
        "direction",
    ),
    "neither point nor selector": ({"action": "double_tap", "args": {}}, "target"),
    "unknown selector key": ({"action": "tap", "args": {"target": {"label": "Log in"}}}, "target"),
    "empty selector": ({"action": "long_press", "args": {"target": {}}}, "target"),
    "two selector keys": ({"action": "tap", "args": {"target": {"text": "a", "resource_id": "b"}}}, "target"),
    "index where none is taken": ({"action": "wait_for", "args": {"target": {"index": 2}}}, "target"),
    "index to assert": ({"action": "assert_visible", "args": {"target": {"index": 0}}}, "target"),
    "index to scroll until visible": ({"action": "scroll_until_visible", "args": {"target": {"index": 0}}}, "target"),
    "scale too small": ({"action": "screenshot", "args": {"scale": 0.05}}, "scale"),
    "scale too large": ({"action": "screenshot", "args": {"scale": 2}}, "scale"),
    "unknown format": ({"action": "screenshot", "args": {"format": "bmp"}}, "format"),
    "unknown direction": ({"action": "scroll", "args": {"direction": "sideways"}}, "direction"),
    "unknown orientation": ({"action": "set_orientation", "args": {"orientation": "diagonal"}}, "orientation"),
    "empty text without clear": ({"action": "type", "args": {"text": ""}}, "text"),
    "url without scheme": ({"action": "open_url", "args": {"url": "example.com"}}, "url"),
    "swipes out of range": (
        {"action": "scroll_until_visible", "args": {"target": LOGIN, "max_swipes": 0}},
        "max_swipes",
    ),
    "timeout out of range": (
        {"action": "wait_for", "args": {"target": LOGIN, "timeout_seconds": 0}},
        "timeout_seconds",
    ),
}


def queued_ids(client) -> set[str]:
    return {task["id"] for task in client.all_tasks(status="queued")}


def names(detail: str, step_id: str, member: str) -> bool:
    return step_id in detail and member in detail


@pytest.mark.req("UI/s13")
def test_every_v12_action_in_every_form_is_accepted_as_given(scene):
    """One plan holding every v1.2 action and form: 201, and the plan reads back exactly as sent."""
    task = scene.submit(plan={"steps": GOOD_STEPS})
    expected = [{"args": {}, **step} for step in GOOD_STEPS]
    assert task["plan"] == {"steps": expected}
    assert scene.acme.get_task(task["id"])["plan"] == {"steps": expected}


@pytest.mark.req("UI/s1", "UI/s13")
@pytest.mark.parametrize("case", sorted(BAD_STEPS))
def test_a_bad_v12_step_is_refused_at_submit_naming_the_step_and_the_argument(scene, case):
    """400 invalid_request whose detail names the step and the argument; no task is created."""
    acme = scene.acme
    before = queued_ids(acme)
    bad, member = BAD_STEPS[case]
    plan = {"steps": [PLAN["steps"][0], {"id": "bad-step", **bad}]}

    problem = scene.submit(plan=plan, expect=(400, "invalid_request"))

    assert names(problem["detail"], "bad-step", member), problem
    assert queued_ids(acme) == before


def session(scene) -> dict:
    body = {"session": {}, "requirements": scene.requirements()}
    task = scene.acme.call("POST", "/v1/tasks", body, expect=201)
    scene.acme.created.append(task["id"])
    return task


@pytest.mark.req("UI/s1", "UI/s13")
def test_a_bad_v12_action_is_refused_at_a_session_post_naming_the_action_and_the_argument(scene):
    """Each bad form is 400 at the post, naming the action id and the argument, and nothing is
    recorded; the good forms are queued."""
    task = session(scene)
    path = f"/v1/tasks/{task['id']}/actions"
    for case, (bad, member) in sorted(BAD_STEPS.items()):
        problem = scene.acme.call("POST", path, {"id": "bad-action", **bad}, expect=(400, "invalid_request"))
        assert names(problem["detail"], "bad-action", member), (case, problem)
    assert scene.acme.call("GET", path)["actions"] == []
    for step in GOOD_STEPS[:3]:
        assert scene.acme.call("POST", path, step, expect=201)["status"] == "queued"


@pytest.mark.req("UI/s13")
def test_a_steer_or_follow_up_with_a_bad_v12_step_is_refused(scene):
    """Steps a message carries are checked as a plan's: 400 naming the step and the argument."""
    task = scene.submit()
    bad = {"id": "bad-step", "action": "tap", "args": {"x": 1, "y": 2, "target": LOGIN}}
    steer = scene.acme.post_message(
        task["id"], "steer", data={"insert_after": None, "steps": [bad]}, expect=(400, "invalid_request")
    )
    assert names(steer["detail"], "bad-step", "target"), steer
    follow = scene.acme.post_message(task["id"], "follow_up", data={"steps": [bad]}, expect=(400, "invalid_request"))
    assert names(follow["detail"], "bad-step", "target"), follow
    assert scene.acme.messages(task["id"]) == []
