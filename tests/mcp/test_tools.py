"""The tools' contract with a model, in process: bad arguments and refusals are tool errors it can
read, and an action's outcome is told as the server recorded it. The control plane here is a
scripted `Transport` (the real one is exercised end to end in test_stdio.py)."""

from __future__ import annotations

import re
from typing import Any

import anyio
import pytest
from mcp import Client

from amc.mcp import server
from amc.mcp.api import ApiFailure


class Scripted:
    """A Transport answering from `routes`: (method, path regex) -> answer, or an ApiFailure to raise."""

    def __init__(self, routes: dict[tuple[str, str], Any]):
        self.routes = routes
        self.requests: list[tuple[str, str, Any, dict | None]] = []

    def request(self, method, path, body=None, params=None, *, repeatable=None, wait=0.0):
        self.requests.append((method, path, body, params))
        for (verb, pattern), answer in self.routes.items():
            if verb == method and re.fullmatch(pattern, path):
                if isinstance(answer, ApiFailure):
                    raise answer
                return 200, answer(body) if callable(answer) else answer
        raise AssertionError(f"unexpected request {method} {path}")

    def read_bytes(self, path):
        self.requests.append(("GET", path, None, None))
        return self.routes[("BYTES", path)]


def call(transport: Scripted, tool: str, arguments: dict) -> Any:
    async def run():
        async with Client(server.build(transport)) as client:
            return await client.call_tool(tool, arguments)

    return anyio.run(run)


def text_of(result) -> str:
    return "\n".join(part.text for part in result.content if part.type == "text")


def ended(status: str, reason: str | None = None, **more) -> Any:
    """An action endpoint that answers the posted step as ended with `status`."""

    def answer(step):
        base = {"seq": 1, "attempt": 1, "status": status, "reason": reason, "artifacts": [], "output": None}
        return base | step | more

    return answer


def test_every_tool_is_listed_with_a_description_and_an_input_schema():
    async def run():
        async with Client(server.build(Scripted({}))) as client:
            return (await client.list_tools()).tools

    tools = {tool.name: tool for tool in anyio.run(run)}
    assert set(tools) == {
        "list_devices", "start_session", "tap", "swipe", "type_text", "press_key", "launch_app", "shell",
        "screenshot", "ui_tree", "tap_element", "action_status", "end_session",
        "submit_plan", "task_status", "cancel_task", "pause_task", "resume_task", "steer_task", "follow_up",
        "list_artifacts", "get_artifact",
    }  # fmt: skip
    for tool in tools.values():
        assert len(tool.description or "") > 80, tool.name
    assert tools["tap"].input_schema["required"] == ["session_id", "x", "y"]
    looking = {name for name, tool in tools.items() if tool.annotations and tool.annotations.read_only_hint}
    assert looking == {
        "list_devices",
        "screenshot",
        "ui_tree",
        "action_status",
        "task_status",
        "list_artifacts",
        "get_artifact",
    }


@pytest.mark.parametrize(
    "tool, arguments, says",
    [
        ("tap", {"session_id": "t_1", "x": -5, "y": 10}, "x"),
        ("tap", {"session_id": "t_1", "x": "left", "y": 10}, "x"),
        ("tap", {"x": 1, "y": 2}, "session_id"),
        ("swipe", {"session_id": "t_1", "x1": 0, "y1": 0, "x2": 1, "y2": 1, "duration_ms": -1}, "duration_ms"),
        ("shell", {"session_id": "t_1", "command": ""}, "command"),
        ("start_session", {"idle_timeout_seconds": 0}, "idle_timeout_seconds"),
        ("tap_element", {"session_id": "t_1"}, "Give text or resource_id"),
        ("steer_task", {"task_id": "t_1", "skip": ["a"], "replace_remaining": []}, "not both"),
        ("submit_plan", {"steps": []}, "steps"),
    ],
)
def test_a_bad_argument_is_a_tool_error_naming_it_and_nothing_is_sent(tool, arguments, says):
    transport = Scripted({})
    result = call(transport, tool, arguments)
    assert result.is_error
    assert says in text_of(result)
    assert transport.requests == []


def test_a_refusal_of_the_server_is_a_tool_error_with_its_words_and_the_next_step():
    refusal = ApiFailure("the task already ended (409 task_terminal)", status=409, code="task_terminal")
    transport = Scripted({("POST", "/v1/tasks/t_1/actions"): refusal})
    result = call(transport, "tap", {"session_id": "t_1", "x": 1, "y": 2})
    assert result.is_error
    assert "Could not send tap to session t_1: the task already ended (409 task_terminal)" in text_of(result)
    assert "Start a new session" in text_of(result)


def test_no_answer_is_a_tool_error_that_says_the_action_may_have_happened():
    transport = Scripted({("POST", "/v1/tasks/t_1/actions"): ApiFailure("cannot connect to the server")})
    result = call(transport, "tap", {"session_id": "t_1", "x": 1, "y": 2})
    assert result.is_error and "may or may not have done what was asked" in text_of(result)


@pytest.mark.parametrize("status", ["failed", "interrupted", "refused", "not_started"])
def test_an_action_that_did_not_complete_is_told_verbatim_as_an_error_result(status):
    reason = f"the reason of {status}, verbatim"
    transport = Scripted({("POST", "/v1/tasks/t_1/actions"): ended(status, reason)})
    result = call(transport, "shell", {"session_id": "t_1", "command": "echo hi"})
    assert result.is_error
    assert f": {status}, reason: {reason}" in text_of(result)


def test_a_completed_action_is_told_with_its_output_and_the_post_asks_the_server_to_wait():
    transport = Scripted({("POST", "/v1/tasks/t_1/actions"): ended("completed", output="hello\n")})
    result = call(transport, "shell", {"session_id": "t_1", "command": "echo hello", "wait_seconds": 5})
    assert not result.is_error
    assert "shell" in text_of(result) and ": completed" in text_of(result) and "hello" in text_of(result)
    (_, _, body, params) = transport.requests[0]
    assert body["action"] == "shell" and body["args"] == {"command": "echo hello"}
    assert params == {"wait_seconds": "5"}


def test_an_action_still_running_when_the_wait_is_over_says_so_and_how_to_wait_again():
    transport = Scripted({("POST", "/v1/tasks/t_1/actions"): ended("delivered")})
    result = call(transport, "shell", {"session_id": "t_1", "command": "sleep 100", "wait_seconds": 0})
    assert not result.is_error
    assert "Not finished yet" in text_of(result) and "action_status" in text_of(result)


def test_press_key_sends_a_number_as_a_number_and_a_name_as_a_name():
    transport = Scripted({("POST", "/v1/tasks/t_1/actions"): ended("completed")})
    call(transport, "press_key", {"session_id": "t_1", "key": "4"})
    call(transport, "press_key", {"session_id": "t_1", "key": "KEYCODE_BACK"})
    assert [r[2]["args"] for r in transport.requests] == [{"key": 4}, {"key": "KEYCODE_BACK"}]


SCREEN = (
    b'<hierarchy><node text="OK" resource-id="a:id/ok" class="x.Button" clickable="true" bounds="[0,0][100,50]"/>'
    b'<node text="OK" resource-id="a:id/ok2" class="x.Button" clickable="true" bounds="[0,100][100,150]"/></hierarchy>'
)


def dump_then(tap_status: str = "completed") -> Scripted:
    def answer(step):
        if step["action"] == "ui_dump":
            return ended("completed", artifacts=["a_dump"])(step)
        return ended(tap_status)(step)

    return Scripted(
        {
            ("POST", "/v1/tasks/t_1/actions"): answer,
            ("BYTES", "/v1/tasks/t_1/artifacts/a_dump"): ("application/xml", SCREEN),
        }
    )


def test_tap_element_with_several_matches_taps_nothing_and_lists_them():
    transport = dump_then()
    result = call(transport, "tap_element", {"session_id": "t_1", "text": "OK"})
    assert result.is_error and "2 elements have text 'OK'" in text_of(result) and "a:id/ok2" in text_of(result)
    assert [r[2]["action"] for r in transport.requests if r[0] == "POST"] == ["ui_dump"]


def test_tap_element_with_no_match_taps_nothing_and_shows_the_screen():
    transport = dump_then()
    result = call(transport, "tap_element", {"session_id": "t_1", "text": "Cancel"})
    assert result.is_error and "no element on the screen has text 'Cancel'" in text_of(result)
    assert '"OK" id=a:id/ok bounds' in text_of(result)


def test_tap_element_taps_the_centre_of_the_one_it_found():
    transport = dump_then()
    result = call(transport, "tap_element", {"session_id": "t_1", "resource_id": "a:id/ok2"})
    assert not result.is_error, text_of(result)
    tap = [r[2] for r in transport.requests if r[0] == "POST"][1]
    assert (tap["action"], tap["args"]) == ("tap", {"x": 50, "y": 125})
    assert "Tapped the centre (50, 125)" in text_of(result)


def test_screenshot_is_an_image_content_of_the_stored_png():
    png = b"\x89PNG\r\n\x1a\nfake"

    transport = Scripted(
        {
            ("POST", "/v1/tasks/t_1/actions"): ended("completed", artifacts=["a_png"]),
            ("BYTES", "/v1/tasks/t_1/artifacts/a_png"): ("image/png", png),
        }
    )
    result = call(transport, "screenshot", {"session_id": "t_1"})
    (image,) = [part for part in result.content if part.type == "image"]
    import base64

    assert image.mime_type == "image/png" and base64.b64decode(image.data) == png
