"""The tools' contract with a model, in process: bad arguments and refusals are tool errors it can
read, and an action's outcome is told as the server recorded it. The control plane here is a
scripted `Transport` (the real one is exercised end to end in test_stdio.py)."""

from __future__ import annotations

import base64
import json
import re
from typing import Any

import anyio
import pytest
from mcp import Client

from amc.mcp import server
from amc.mcp.api import ApiFailure

req = pytest.mark.req


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
        "list_devices", "start_session", "observe", "ui_tree", "tap", "double_tap", "long_press", "scroll", "swipe",
        "type", "wait_for", "back", "home", "press_key", "launch_app", "shell", "action_status", "end_session",
        "submit_plan", "task_status", "cancel_task", "pause_task", "resume_task", "steer_task", "follow_up",
        "list_artifacts", "get_artifact", "install_app", "list_apps", "start_recording", "stop_recording",
    }  # fmt: skip
    for tool in tools.values():
        assert len(tool.description or "") > 80, tool.name
    assert tools["tap"].input_schema["required"] == ["session_id"]
    where = {"index", "text", "text_contains", "resource_id", "description", "class", "nth", "x", "y"}
    for name in ("tap", "double_tap", "long_press"):
        assert where <= set(tools[name].input_schema["properties"]), name
    assert where - {"x", "y"} <= set(tools["scroll"].input_schema["properties"])
    assert "index" not in tools["wait_for"].input_schema["properties"]
    looking = {name for name, tool in tools.items() if tool.annotations and tool.annotations.read_only_hint}
    assert looking == {
        "list_devices",
        "observe",
        "ui_tree",
        "action_status",
        "task_status",
        "list_artifacts",
        "get_artifact",
    }


@req("UI/s14")
@pytest.mark.parametrize(
    "tool, arguments, says",
    [
        ("tap", {"session_id": "t_1", "x": -5, "y": 10}, "x should be greater than or equal to 0 (got -5)"),
        ("tap", {"session_id": "t_1", "x": "left", "y": 10}, "x should be a valid integer"),
        ("tap", {"x": 1, "y": 2}, "session_id is required"),
        ("observe", {"session_id": "t_1", "scale": 2}, "scale should be less than or equal to 1 (got 2)"),
        ("observe", {"session_id": "t_1", "format": "gif"}, "format should be 'png', 'jpeg' or 'webp' (got 'gif')"),
        ("scroll", {"session_id": "t_1", "direction": "sideways"}, "direction should be 'up', 'down', 'left' or"),
        ("swipe", {"session_id": "t_1", "x1": 0, "y1": 0, "x2": 1, "y2": 1, "duration_ms": -1}, "duration_ms"),
        ("shell", {"session_id": "t_1", "command": ""}, "command should have at least 1 character (got '')"),
        ("start_session", {"idle_timeout_seconds": 0}, "idle_timeout_seconds should be greater than 0"),
        ("stop_recording", {"session_id": "t_1", "wait_seconds": -1}, "wait_seconds should be greater than or"),
        ("start_recording", {}, "session_id is required"),
        ("submit_plan", {"steps": []}, "steps should have at least 1 item"),
    ],
)
def test_a_bad_argument_is_one_sentence_naming_it_and_nothing_is_sent(tool, arguments, says):
    transport = Scripted({})
    result = call(transport, tool, arguments)
    assert result.is_error
    said = text_of(result)
    assert said.startswith(f"{tool} was called with bad arguments: ") and says in said
    assert said.endswith(f"and call {tool} again.") and "\n" not in said
    assert "pydantic" not in said and "validation error" not in said and "type=" not in said
    assert transport.requests == []


@req("UI/s14")
@pytest.mark.parametrize(
    "tool, arguments, says",
    [
        ("tap", {"session_id": "t_1", "txt": "OK"}, "tap has no argument 'txt'; its arguments are class, "),
        ("wait_for", {"session_id": "t_1", "index": 3}, "wait_for has no argument 'index'"),
        ("tap", {"session_id": "t_1"}, "tap needs to know where: give index (an element [n] from observe), or one "),
        ("tap", {"session_id": "t_1", "text": "OK", "index": 2}, "tap got both index and text: name the element"),
        ("tap", {"session_id": "t_1", "text": "OK", "x": 1, "y": 2}, "tap got both an element and x,y"),
        ("double_tap", {"session_id": "t_1", "x": 1}, "double_tap got x alone: a point needs both x and y."),
        ("long_press", {"session_id": "t_1", "nth": 1}, "long_press got nth without a selector"),
        ("tap", {"session_id": "t_1", "text": ""}, "tap: target.text must be a non-empty string"),
        ("type", {"session_id": "t_1", "text": ""}, "type got an empty text: give the text to type, or clear"),
        ("wait_for", {"session_id": "t_1"}, "wait_for needs the element to wait for"),
        ("steer_task", {"task_id": "t_1", "skip": ["a"], "replace_remaining": []}, "Give either skip or"),
    ],
)
def test_where_to_act_said_wrongly_is_one_sentence_and_nothing_is_sent(tool, arguments, says):
    transport = Scripted({})
    result = call(transport, tool, arguments)
    assert result.is_error
    assert text_of(result).startswith(says) and "Error executing tool" not in text_of(result)
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


LOG_IN = {
    "index": 3, "class": "android.widget.Button", "text": "Log in", "description": "",
    "resource_id": "com.example.app:id/login", "bounds": [40, 600, 1040, 720], "clickable": True,
    "long_clickable": False, "checkable": False, "checked": False, "focused": False, "scrollable": False,
    "enabled": True, "editable": False,
}  # fmt: skip
OBSERVED = {
    "screen": {"width": 1080, "height": 2400, "rotation": 0},
    "fingerprint": "f1",
    "elements": [
        {
            **LOG_IN,
            "index": 0,
            "class": "android.widget.TextView",
            "text": "Example",
            "resource_id": "",
            "clickable": False,
        },
        {
            **LOG_IN,
            "index": 1,
            "class": "android.widget.EditText",
            "text": "Username",
            "editable": True,
            "focused": True,
        },
        {**LOG_IN, "index": 2},
    ],
    "image": {"width": 540, "height": 1200, "format": "png", "scale": 0.5, "marks": True},
}


def posted(transport: Scripted) -> list[dict]:
    return [body for method, path, body, _ in transport.requests if method == "POST" and path.endswith("/actions")]


@req("UI/s14")
@pytest.mark.parametrize(
    "arguments, args",
    [
        ({"index": 3}, {"target": {"index": 3}}),
        ({"text": "Log in"}, {"target": {"text": "Log in"}}),
        ({"text_contains": "log"}, {"target": {"text_contains": "log"}}),
        ({"resource_id": "login", "nth": 1}, {"target": {"resource_id": "login", "nth": 1}}),
        ({"description": "Navigate up"}, {"target": {"description": "Navigate up"}}),
        ({"class": "Button", "nth": 0}, {"target": {"class": "Button", "nth": 0}}),
        ({"x": 540, "y": 660}, {"x": 540, "y": 660}),
    ],
)
def test_tap_sends_the_element_or_the_point_for_the_host_agent_to_resolve(arguments, args):
    transport = Scripted({("POST", "/v1/tasks/t_1/actions"): ended("completed")})
    assert not call(transport, "tap", {"session_id": "t_1", **arguments}).is_error
    (step,) = posted(transport)
    assert (step["action"], step["args"]) == ("tap", args)


@req("UI/s14")
@pytest.mark.parametrize(
    "tool, arguments, action, args",
    [
        ("double_tap", {"text": "Double-tap me"}, "double_tap", {"target": {"text": "Double-tap me"}}),
        ("long_press", {"index": 4}, "long_press", {"target": {"index": 4}, "duration_ms": 1000}),
        ("long_press", {"x": 5, "y": 6, "duration_ms": 700}, "long_press", {"x": 5, "y": 6, "duration_ms": 700}),
        ("scroll", {"direction": "down"}, "scroll", {"direction": "down"}),
        (
            "scroll",
            {"direction": "up", "resource_id": "com.example.app:id/list"},
            "scroll",
            {"direction": "up", "target": {"resource_id": "com.example.app:id/list"}},
        ),
        ("type", {"text": "ada", "index": 1}, "type", {"text": "ada", "clear": False, "target": {"index": 1}}),
        ("type", {"text": "", "clear": True, "field_text": "ada"}, "type", {"text": "", "clear": True, "target": {"text": "ada"}}),
        ("type", {"text": "x"}, "type", {"text": "x", "clear": False}),
        (
            "wait_for",
            {"text": "Ready", "timeout_seconds": 5},
            "wait_for",
            {"target": {"text": "Ready"}, "gone": False, "timeout_seconds": 5},
        ),
        ("back", {}, "back", {}),
        ("home", {}, "home", {}),
        ("list_apps", {}, "list_apps", {"third_party": False}),
        ("start_recording", {}, "record", {"mode": "start"}),
        (
            "install_app",
            {"input": "sha256:" + "a" * 64, "grant_permissions": True},
            "install",
            {"input": {"input": "sha256:" + "a" * 64}, "replace": True, "grant_permissions": True},
        ),
    ],
)  # fmt: skip
def test_each_action_tool_sends_its_action_with_the_contracts_arguments(tool, arguments, action, args):
    transport = Scripted({("POST", "/v1/tasks/t_1/actions"): ended("completed")})
    result = call(transport, tool, {"session_id": "t_1", **arguments})
    assert not result.is_error, text_of(result)
    (step,) = posted(transport)
    assert (step["action"], step["args"]) == (action, args)


def test_wait_for_waits_longer_than_its_timeout_for_the_outcome():
    transport = Scripted({("POST", "/v1/tasks/t_1/actions"): ended("delivered")})
    call(transport, "wait_for", {"session_id": "t_1", "text": "Ready", "timeout_seconds": 5})
    # The post asks the server to wait (at most 30 s per request) longer than the phone waits.
    assert transport.requests[0][3] == {"wait_seconds": "30"}


@req("UI/s14")
def test_an_element_action_result_carries_the_id_status_element_and_point_as_structured_content():
    output = json.dumps({"element": LOG_IN, "point": [540, 660]}, separators=(",", ":"))
    transport = Scripted({("POST", "/v1/tasks/t_1/actions"): ended("completed", output=output)})
    result = call(transport, "tap", {"session_id": "t_1", "text": "Log in"})
    assert not result.is_error
    structured = result.structured_content
    assert structured["action_id"].startswith("tap-") and structured["status"] == "completed"
    assert structured["reason"] is None and structured["element"] == LOG_IN and structured["point"] == [540, 660]
    said = text_of(result)
    assert 'Element: [3] Button "Log in" id=com.example.app:id/login bounds=[40,600][1040,720] clickable' in said
    assert "Point: (540, 660)" in said and output not in said


@req("UI/s14")
def test_an_element_action_that_found_nothing_is_an_error_result_with_the_reason():
    reason = 'no element matches text "Sign in"; the screen showed: "Example", "Username", "Log in" (3 elements)'
    transport = Scripted({("POST", "/v1/tasks/t_1/actions"): ended("failed", reason)})
    result = call(transport, "tap", {"session_id": "t_1", "text": "Sign in"})
    assert result.is_error
    assert result.structured_content["status"] == "failed" and result.structured_content["reason"] == reason
    assert f": failed, reason: {reason}" in text_of(result)


@req("UI/s14")
def test_observe_posts_one_screenshot_and_returns_the_image_with_the_element_list():
    png = b"\x89PNG\r\n\x1a\nfake"
    output = json.dumps(OBSERVED)
    transport = Scripted(
        {
            ("POST", "/v1/tasks/t_1/actions"): ended("completed", output=output, artifacts=["a_png"]),
            ("BYTES", "/v1/tasks/t_1/artifacts/a_png"): ("image/png", png),
        }
    )
    result = call(transport, "observe", {"session_id": "t_1", "marks": True})
    assert not result.is_error
    (step,) = posted(transport)
    assert (step["action"], step["args"]) == ("screenshot", {"scale": 0.5, "format": "png", "marks": True})
    (image,) = [part for part in result.content if part.type == "image"]
    assert image.mime_type == "image/png" and base64.b64decode(image.data) == png
    lines = text_of(result).splitlines()
    assert lines[0].startswith(f"Screen from action {step['id']}: 1080x2400, rotation 0, 3 elements; image 540x1200")
    assert lines[1:] == [
        '[0] TextView "Example" bounds=[40,600][1040,720]',
        '[1] EditText "Username" id=com.example.app:id/login bounds=[40,600][1040,720] clickable focused editable',
        '[2] Button "Log in" id=com.example.app:id/login bounds=[40,600][1040,720] clickable',
    ]  # fmt: skip
    structured = result.structured_content
    assert structured["elements"] == OBSERVED["elements"] and structured["image"] == OBSERVED["image"]
    assert structured["action_id"] == step["id"] and structured["status"] == "completed"


def test_observe_without_an_element_list_says_so_and_still_shows_the_image():
    transport = Scripted(
        {
            ("POST", "/v1/tasks/t_1/actions"): ended("completed", artifacts=["a_png"]),
            ("BYTES", "/v1/tasks/t_1/artifacts/a_png"): ("image/png", b"png"),
        }
    )
    result = call(transport, "observe", {"session_id": "t_1"})
    assert "No element list came with the screenshot" in text_of(result)
    assert [part.type for part in result.content] == ["text", "image"]


def test_ui_tree_reads_the_elements_and_the_diff_from_the_ui_tree_action():
    observed = {key: OBSERVED[key] for key in ("screen", "fingerprint", "elements")}
    observed["diff"] = {"added": [LOG_IN], "removed": [], "changed": []}
    transport = Scripted({("POST", "/v1/tasks/t_1/actions"): ended("completed", output=json.dumps(observed))})
    result = call(transport, "ui_tree", {"session_id": "t_1", "diff": True})
    (step,) = posted(transport)
    assert (step["action"], step["args"]) == ("ui_tree", {"diff": True})
    said = text_of(result)
    assert "3 elements" in said and "Since the previous ui_tree: 1 added, 0 removed, 0 changed." in said
    assert '+ [3] Button "Log in"' in said


def queued_session(reason: str, matching: int) -> Scripted:
    task = {
        "id": "t_9",
        "status": "queued",
        "attempts": [],
        "waiting": {"reason": reason, "matching_devices": matching},
    }
    return Scripted(
        {
            ("POST", "/v1/tasks"): task,
            ("GET", "/v1/tasks/t_9"): task,
            ("POST", "/v1/tasks/t_9/cancel"): task | {"status": "cancelled"},
        }
    )


@req("UI/s14")
def test_a_session_no_phone_can_take_is_refused_at_once_with_the_servers_reason_and_withdrawn():
    transport = queued_session("no_device_matches", 0)
    result = call(transport, "start_session", {"model": "Pixel 99"})
    assert result.is_error
    said = text_of(result)
    assert said.startswith("No session: no registered phone meets its requirements (waiting: no_device_matches, ")
    assert "matching_devices: 0, requirements: model=Pixel 99), at once." in said
    assert "The request (t_9) was cancelled, so nothing is left queued." in said and "keep_waiting" in said
    assert [(m, p) for m, p, *_ in transport.requests] == [("POST", "/v1/tasks"), ("POST", "/v1/tasks/t_9/cancel")]


@req("UI/s14")
def test_a_session_whose_phones_stay_busy_is_withdrawn_after_the_wait_naming_the_count():
    transport = queued_session("matching_devices_busy", 2)
    result = call(transport, "start_session", {"wait_seconds": 0})
    assert result.is_error
    said = text_of(result)
    assert "every online phone that meets its requirements is busy with another task" in said
    assert "(waiting: matching_devices_busy, matching_devices: 2, requirements: any phone), after waiting 0 s" in said
    assert ("POST", "/v1/tasks/t_9/cancel") in [(m, p) for m, p, *_ in transport.requests]


def test_a_session_asked_to_keep_waiting_stays_queued_and_says_why():
    transport = queued_session("no_device_matches", 0)
    result = call(transport, "start_session", {"serial": "nope", "wait_seconds": 0, "keep_waiting": True})
    assert not result.is_error
    assert "stays queued, as asked" in text_of(result) and "serial=nope" in text_of(result)
    assert result.structured_content == {
        "session_id": "t_9",
        "status": "queued",
        "waiting": {"reason": "no_device_matches", "matching_devices": 0},
    }
    assert all(not p.endswith("/cancel") for _, p, *_ in transport.requests)


def test_an_element_line_reads_as_the_kernels_line_of_the_same_element():
    """The tools print ELEMENT objects from the wire; the lines match amc.core.ui's own for the element."""
    from amc.core.ui.tree import parse_dump
    from amc.mcp import describe

    xml = (
        '<hierarchy rotation="0"><node class="android.widget.FrameLayout" bounds="[0,0][1080,2400]">'
        '<node text="say &quot;hi&quot;&#10;twice" content-desc="d" resource-id="a:id/b" class="x.Button" '
        'clickable="true" checkable="true" checked="true" enabled="false" bounds="[0,0][10,20]"/>'
        '<node class="android.widget.EditText" resource-id="a:id/name" focused="true" long-clickable="true" '
        'scrollable="true" bounds="[0,30][100,60]"/></node></hierarchy>'
    )
    elements = parse_dump(xml).elements
    assert len(elements) == 2
    for element in elements:
        assert describe.element_line(element.to_json()) == element.line()


def test_several_bad_arguments_are_one_sentence_with_a_clause_each():
    result = call(Scripted({}), "long_press", {"session_id": "t_1", "x": -1, "duration_ms": 0, "wait_seconds": "soon"})
    assert text_of(result) == (
        "long_press was called with bad arguments: x should be greater than or equal to 0 (got -1); "
        "duration_ms should be greater than or equal to 1 (got 0); wait_seconds should be a valid number, unable to "
        "parse string as a number (got 'soon'). Fix them and call long_press again."
    )


def test_an_observation_read_back_with_action_status_lists_its_elements_as_lines():
    transport = Scripted(
        {
            ("GET", "/v1/tasks/t_1/actions/screenshot-1"): ended("completed", output=json.dumps(OBSERVED))(
                {"id": "screenshot-1", "action": "screenshot"}
            )
        }
    )
    result = call(transport, "action_status", {"session_id": "t_1", "action_id": "screenshot-1"})
    assert 'Elements (3):\n[0] TextView "Example" bounds=[40,600][1040,720]\n[1] EditText' in text_of(result)
    assert result.structured_content["elements"] == OBSERVED["elements"]


class Uploading(Scripted):
    """A Scripted transport that also takes uploads, answering the sha256 of the bytes."""

    uploaded: list[bytes]

    def upload_input(self, path):
        import hashlib

        data = path.read_bytes()
        self.uploaded = [*getattr(self, "uploaded", []), data]
        return {"ref": f"sha256:{hashlib.sha256(data).hexdigest()}"}, True


def test_install_app_uploads_a_local_apk_first_and_installs_its_reference(tmp_path):
    import hashlib

    apk = tmp_path / "app.apk"
    apk.write_bytes(b"an APK's bytes")
    transport = Uploading({("POST", "/v1/tasks/t_1/actions"): ended("completed")})
    result = call(transport, "install_app", {"session_id": "t_1", "path": str(apk)})
    assert not result.is_error, text_of(result)
    assert transport.uploaded == [b"an APK's bytes"]
    (step,) = posted(transport)
    digest = hashlib.sha256(b"an APK's bytes").hexdigest()
    assert step["args"]["input"] == {"input": f"sha256:{digest}"}


@pytest.mark.parametrize("arguments", [{}, {"input": "sha256:" + "a" * 64, "path": "/tmp/x.apk"}])
def test_install_app_takes_exactly_one_of_input_or_path_and_sends_nothing_otherwise(arguments):
    transport = Uploading({})
    result = call(transport, "install_app", {"session_id": "t_1", **arguments})
    assert result.is_error and "exactly one of input" in text_of(result)
    assert transport.requests == []


MP4 = {"id": "a_2", "name": "rec-1-record.mp4", "content_type": "video/mp4", "size": 48213, "attempt": 1}


@req("RECORD/s5")
def test_stop_recording_returns_the_mp4s_id_size_and_download_path_not_the_video():
    listed = {"artifacts": [{"id": "a_1", "name": "shot.png", "content_type": "image/png", "size": 9}, MP4]}
    transport = Scripted(
        {
            ("POST", "/v1/tasks/t_1/actions"): ended("completed", output='{"recording": "stopped", "segments": 1}',
                                                     artifacts=["a_2"]),
            ("GET", "/v1/tasks/t_1/artifacts"): listed,
        }
    )  # fmt: skip
    result = call(transport, "stop_recording", {"session_id": "t_1"})
    assert not result.is_error, text_of(result)
    (step,) = posted(transport)
    assert (step["action"], step["args"]) == ("record", {"mode": "stop"})
    video = {
        "artifact_id": "a_2",
        "name": "rec-1-record.mp4",
        "content_type": "video/mp4",
        "size": 48213,
        "url": "/v1/tasks/t_1/artifacts/a_2",
    }
    assert result.structured_content["recordings"] == [video]
    assert result.structured_content["recording"] == "stopped" and result.structured_content["status"] == "completed"
    said = text_of(result)
    assert "Recording a_2: rec-1-record.mp4 (video/mp4, 48213 bytes), download: GET /v1/tasks/t_1/artifacts/a_2" in said
    assert [part.type for part in result.content] == ["text"]  # the video's bytes are never inlined
    assert not any(request[0] == "GET" and request[1].endswith("/a_2") for request in transport.requests)


@req("RECORD/s5")
def test_stop_recording_when_nothing_records_is_an_error_result_with_the_reason_and_lists_nothing():
    transport = Scripted({("POST", "/v1/tasks/t_1/actions"): ended("failed", "not recording")})
    result = call(transport, "stop_recording", {"session_id": "t_1"})
    assert result.is_error and "not recording" in text_of(result)
    assert "recordings" not in result.structured_content
    assert [request[1] for request in transport.requests] == ["/v1/tasks/t_1/actions"]
