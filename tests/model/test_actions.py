"""The action table (amc.core.actions; specs/protocol.md, Plan, v1.2): every action's good
forms pass, and every bad one is refused in one sentence naming the step and the member.

Checked through `parse_plan`, the function a submit, a session action, a steer and a
follow-up all go through, so the details here are the 400 details callers get.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from amc.core import actions
from amc.core.errors import InvalidRequest
from amc.core.plans import parse_plan, parse_step
from amc.core.ui.target import parse_target

req = pytest.mark.req

LOGIN = {"text": "Log in"}

# Good calls of every action protocol v1.2 adds or extends: at least one per form, the
# bounds of each range, and every optional argument.
GOOD: list[tuple[str, dict[str, Any]]] = [
    ("tap", {"x": 0, "y": 100_000}),
    ("tap", {"target": LOGIN}),
    ("tap", {"target": {"index": 3}}),
    ("tap", {"target": {"text_contains": "log", "nth": 1}}),
    ("double_tap", {"x": 10, "y": 20}),
    ("double_tap", {"target": {"description": "Navigate up"}}),
    ("long_press", {"x": 10, "y": 20}),
    ("long_press", {"target": {"resource_id": "login"}, "duration_ms": 1}),
    ("long_press", {"x": 1, "y": 2, "duration_ms": 60_000}),
    ("swipe", {"x1": 1, "y1": 2, "x2": 3, "y2": 4}),
    ("swipe", {"x1": 1, "y1": 2, "x2": 3, "y2": 4, "duration_ms": 0}),
    ("swipe", {"direction": "left"}),
    ("swipe", {"direction": "up", "target": {"class": "RecyclerView"}, "duration_ms": 600_000}),
    ("scroll", {"direction": "down"}),
    ("scroll", {"direction": "right", "target": {"resource_id": "com.example.app:id/list"}}),
    ("scroll", {"direction": "up", "target": {"index": 0}}),
    ("scroll_until_visible", {"target": {"text": "Item 40"}}),
    ("scroll_until_visible", {"target": {"text": "Item 1"}, "direction": "up", "max_swipes": 1}),
    ("scroll_until_visible", {"target": {"text": "Item 1"}, "max_swipes": 100}),
    ("back", {}),
    ("home", {}),
    ("enter", {}),
    ("type", {"text": "alice"}),
    ("type", {"text": "Grüße, 世界", "target": {"class": "EditText"}, "clear": True}),
    ("type", {"text": "", "clear": True}),
    ("type", {"text": "x", "clear": False}),
    ("wait_for", {"target": {"text": "Ready"}}),
    ("wait_for", {"target": {"text": "Loading…"}, "gone": True, "timeout_seconds": 600}),
    ("wait_for", {"target": LOGIN, "timeout_seconds": 0.5}),
    ("assert_visible", {"target": LOGIN}),
    ("assert_not_visible", {"target": {"text_contains": "error"}}),
    ("wait_for_idle", {}),
    ("wait_for_idle", {"quiet_ms": 0, "timeout_seconds": 10}),
    ("wait_for_idle", {"quiet_ms": 60_000}),
    ("stop_app", {"package": "com.example.app"}),
    ("clear_app_data", {"package": "com.example.app"}),
    ("open_url", {"url": "https://example.com/path?q=1#top"}),
    ("open_url", {"url": "market://details?id=com.example.app"}),
    ("set_orientation", {"orientation": "portrait"}),
    ("set_orientation", {"orientation": "landscape"}),
    ("list_apps", {}),
    ("list_apps", {"third_party": True}),
    ("screenshot", {}),
    ("screenshot", {"scale": 0.1, "format": "jpeg", "quality": 1, "marks": True, "settle": False}),
    ("screenshot", {"scale": 1, "format": "webp", "quality": 100}),
    ("screenshot", {"format": "png", "quality": 80}),
    ("ui_tree", {}),
    ("ui_tree", {"diff": True, "settle": False}),
    ("ui_dump", {"settle": False}),
]

# Bad calls: (action, args, the member the detail must name, what the detail must say).
BAD: list[tuple[str, dict[str, Any], str, str]] = [
    # a selector and a point (or points) together, or neither
    ("tap", {"x": 1, "y": 2, "target": LOGIN}, "'target'", "does not go with 'x' and 'y'"),
    ("tap", {"x": 1, "target": LOGIN}, "'target'", "does not go with 'x'"),
    ("double_tap", {"y": 2, "target": LOGIN}, "'target'", "tap takes x and y, or target"),
    ("long_press", {"x": 1, "y": 2, "target": LOGIN, "duration_ms": 5}, "'target'", "does not go with"),
    ("tap", {}, "tap", "requires x and y, or target"),
    ("long_press", {"duration_ms": 500}, "long_press", "requires x and y, or target"),
    ("tap", {"x": 1}, "'y'", "requires argument 'y'"),
    ("swipe", {"x1": 1, "y1": 2, "x2": 3, "y2": 4, "target": LOGIN}, "'target'", "x1, y1, x2 and y2, or direction"),
    ("swipe", {"x1": 1, "y1": 2, "x2": 3, "y2": 4, "direction": "up"}, "'direction'", "does not go with"),
    ("swipe", {"target": LOGIN}, "'direction'", "requires argument 'direction'"),
    ("swipe", {}, "swipe", "requires x1, y1, x2 and y2, or direction"),
    # selectors: unknown key, empty, two keys, bad values
    ("tap", {"target": {"txt": "Log in"}}, "'target'", "unknown key 'txt'"),
    ("tap", {"target": {}}, "'target'", "target is empty"),
    ("tap", {"target": {"text": "a", "class": "b"}}, "'target'", "exactly one key"),
    ("tap", {"target": "Log in"}, "'target'", "must be an object"),
    ("tap", {"target": {"text": ""}}, "'target'", "non-empty string"),
    ("tap", {"target": {"index": -1}}, "'target'", "target.index must be an integer"),
    ("tap", {"target": {"text": "a", "nth": -1}}, "'target'", "target.nth"),
    ("tap", {"target": {"index": 2, "nth": 1}}, "'target'", "does not go with target.index"),
    # an index where the action looks at screens to come
    ("scroll_until_visible", {"target": {"index": 3}}, "'target'", "target.index names an element"),
    ("wait_for", {"target": {"index": 3}}, "'target'", "wait_for looks at the screens to come"),
    ("assert_visible", {"target": {"index": 0}}, "'target'", "target.index"),
    ("assert_not_visible", {"target": {"index": 0}}, "'target'", "target.index"),
    ("scroll_until_visible", {}, "'target'", "requires argument 'target'"),
    ("wait_for", {"gone": True}, "'target'", "requires argument 'target'"),
    # ranges, enumerations and types
    ("swipe", {"direction": "sideways"}, "'direction'", "one of up, down, left, right"),
    ("scroll", {"direction": "DOWN"}, "'direction'", "one of up, down, left, right"),
    ("scroll", {}, "'direction'", "requires argument 'direction'"),
    ("scroll", {"direction": "down", "x": 1}, "'x'", "unknown argument"),
    ("scroll_until_visible", {"target": LOGIN, "max_swipes": 0}, "'max_swipes'", "1..100"),
    ("scroll_until_visible", {"target": LOGIN, "max_swipes": 101}, "'max_swipes'", "1..100"),
    ("long_press", {"x": 1, "y": 2, "duration_ms": 0}, "'duration_ms'", "1..60000"),
    ("long_press", {"x": 1, "y": 2, "duration_ms": 60_001}, "'duration_ms'", "1..60000"),
    ("back", {"times": 2}, "'times'", "unknown argument"),
    ("type", {"target": LOGIN}, "'text'", "requires argument 'text'"),
    ("type", {"text": ""}, "'text'", "only with clear: true"),
    ("type", {"text": "", "clear": False}, "'text'", "only with clear: true"),
    ("type", {"text": "a", "clear": "yes"}, "'clear'", "true or false"),
    ("type", {"text": 5}, "'text'", "a string"),
    ("wait_for", {"target": LOGIN, "timeout_seconds": 0}, "'timeout_seconds'", "(0, 600]"),
    ("wait_for", {"target": LOGIN, "timeout_seconds": 601}, "'timeout_seconds'", "(0, 600]"),
    ("wait_for", {"target": LOGIN, "gone": 1}, "'gone'", "true or false"),
    ("wait_for_idle", {"quiet_ms": -1}, "'quiet_ms'", "0..60000"),
    ("wait_for_idle", {"timeout_seconds": True}, "'timeout_seconds'", "(0, 600]"),
    ("stop_app", {}, "'package'", "requires argument 'package'"),
    ("clear_app_data", {"package": ""}, "'package'", "a package name"),
    ("stop_app", {"package": "Settings"}, "'package'", "a package name such as com.example.app"),
    ("stop_app", {"package": "x; reboot"}, "'package'", "a package name"),
    ("clear_app_data", {"package": "com.example.app "}, "'package'", "a package name"),
    ("open_url", {"url": "example.com"}, "'url'", "with a scheme"),
    ("open_url", {"url": "https://example.com/a b"}, "'url'", "without spaces"),
    ("open_url", {"url": "https:"}, "'url'", "with a scheme"),
    ("open_url", {"url": "https://e.com/" + "x" * 8192}, "'url'", "at most 8192"),
    ("set_orientation", {"orientation": "upside_down"}, "'orientation'", "one of portrait, landscape"),
    ("list_apps", {"third_party": "true"}, "'third_party'", "true or false"),
    ("screenshot", {"scale": 0}, "'scale'", "0.1..1"),
    ("screenshot", {"scale": 0.05}, "'scale'", "0.1..1"),
    ("screenshot", {"scale": 1.5}, "'scale'", "0.1..1"),
    ("screenshot", {"format": "gif"}, "'format'", "one of png, jpeg, webp"),
    ("screenshot", {"quality": 0}, "'quality'", "1..100"),
    ("screenshot", {"quality": 80.5}, "'quality'", "1..100"),
    ("screenshot", {"marks": "yes"}, "'marks'", "true or false"),
    ("ui_tree", {"diff": None}, "'diff'", "true or false"),
    ("ui_tree", {"depth": 3}, "'depth'", "unknown argument"),
    ("ui_dump", {"settle": 0}, "'settle'", "true or false"),
]


def plan_of(action: str, args: dict[str, Any], step_id: str = "s") -> dict[str, Any]:
    return {"steps": [{"id": step_id, "action": action, "args": args}]}


def refused(action: str, args: dict[str, Any], step_id: str = "s") -> str:
    with pytest.raises(InvalidRequest) as error:
        parse_plan(plan_of(action, args, step_id))
    return error.value.detail


@req("UI/s13")
@pytest.mark.parametrize(("action", "args"), GOOD, ids=[f"{a}-{i}" for i, (a, _) in enumerate(GOOD)])
def test_every_form_of_every_new_action_is_accepted(action, args):
    """The step parses and keeps its arguments as given (defaults are the executor's)."""
    step = parse_plan(plan_of(action, args)).steps[0]
    assert (step.action, step.args) == (action, args)


@req("UI/s1", "UI/s13")
@pytest.mark.parametrize(("action", "args", "member", "says"), BAD, ids=[f"{b[0]}-{i}" for i, b in enumerate(BAD)])
def test_every_bad_form_is_refused_naming_the_step_and_the_member(action, args, member, says):
    detail = refused(action, args, step_id="login")
    assert detail.startswith("step 'login': "), detail
    assert member in detail and says in detail, detail


@req("UI/s1")
def test_a_selector_refusal_is_the_selectors_own_sentence_prefixed_with_step_and_member():
    """The contract's detail shape: ``step '<id>': argument 'target' of <action>: <sentence>``."""
    for bad in ({"txt": "x"}, {}, {"text": "a", "index": 1}, [], {"index": "3"}):
        with pytest.raises(ValueError) as sentence:
            parse_target(bad)
        assert (
            refused("double_tap", {"target": bad}, "t1")
            == f"step 't1': argument 'target' of double_tap: {sentence.value}"
        )


@req("UI/s13")
def test_a_refusal_is_one_sentence_that_mcp_can_show_as_it_is():
    """`actions.refusal` is the same sentence without the step; None for a good call."""
    assert actions.refusal("tap", {"target": LOGIN}) is None
    assert (
        actions.refusal("screenshot", {"scale": 2})
        == "argument 'scale' of screenshot must be a number in 0.1..1 (1 is full size)"
    )
    assert actions.refusal("fly", {}).startswith("unknown action 'fly'; known actions: shell, tap, double_tap")
    assert actions.refusal(None, {}).startswith("action must be a string")


@req("UI/s13")
def test_session_actions_steers_and_follow_ups_share_the_check():
    """A session action is parsed by `parse_step` with ``action`` as its place; the details agree."""
    with pytest.raises(InvalidRequest) as error:
        parse_step({"id": "a1", "action": "wait_for", "args": {"target": {"index": 1}}}, "action")
    assert error.value.detail.startswith("step 'a1': argument 'target' of wait_for: target.index")


def test_the_existing_actions_keep_their_arguments():
    """v1.2 extends the table; a v1.1 plan still parses the same."""
    v11 = [
        ("shell", {"command": "ls", "timeout_seconds": 5}),
        ("tap", {"x": 1, "y": 2}),
        ("swipe", {"x1": 1, "y1": 2, "x2": 3, "y2": 4, "duration_ms": 300}),
        ("text", {"text": ""}),
        ("keyevent", {"key": "KEYCODE_HOME"}),
        ("keyevent", {"key": 3}),
        ("launch", {"package": "p", "activity": ".Main"}),
        ("screenshot", {}),
        ("wait", {"seconds": 0}),
        ("ui_dump", {}),
        ("logcat", {"lines": 10_000}),
    ]
    for action, args in v11:
        assert parse_plan(plan_of(action, args)).steps[0].args == args


JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-5, 200_000) | st.floats(-2, 700) | st.text(max_size=5),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.sampled_from(["text", "index", "nth", "x"]), inner, max_size=3)
    ),
    max_leaves=6,
)
NAMES = sorted({name for action in actions.ACTIONS.values() for form in action.forms for name in form.names} | {"z"})


@given(action=st.sampled_from(sorted(actions.ACTIONS)), args=st.dictionaries(st.sampled_from(NAMES), JSON, max_size=4))
def test_every_call_is_accepted_or_refused_in_a_sentence_never_an_exception(action, args):
    """Totality: any JSON arguments give None or one sentence naming the action or an argument."""
    said = actions.refusal(action, args)
    assert said is None or (isinstance(said, str) and action in said and "\n" not in said)
