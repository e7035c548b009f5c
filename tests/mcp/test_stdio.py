"""`amc mcp` end to end: the MCP SDK's own client starts it on stdio, against a real server with
simulated phones and a Host Agent (`amc up`), and drives a phone the way an AI agent would."""

from __future__ import annotations

import base64
import os
import re
import subprocess
import sys
from pathlib import Path

import anyio
import httpx
import pytest

from tests.mcp.stack import Stack

SESSION_TOOLS = {"list_devices", "start_session", "observe", "tap", "type", "wait_for", "back", "shell", "end_session"}
PLAN_TOOLS = {"submit_plan", "task_status", "cancel_task", "pause_task", "resume_task", "steer_task", "follow_up"}


def text_of(result) -> str:
    return "\n".join(part.text for part in result.content if part.type == "text")


def image_of(result) -> bytes:
    (image,) = [part for part in result.content if part.type == "image"]
    assert image.mime_type == "image/png"
    return base64.b64decode(image.data)


def texts(observed) -> list[str]:
    return [element["text"] for element in observed.structured_content["elements"]]


req = pytest.mark.req


def serves_sessions(stack: Stack) -> bool:
    """Whether the server takes a session (specs/protocol.md Part D); the probe asks for a phone
    that does not exist, so it is never claimed, and is cancelled at once."""
    headers = {"Authorization": f"Bearer {stack.token}"}
    body = {"session": {}, "requirements": {"serial": "no-such-phone"}}
    answer = httpx.post(f"{stack.url}/v1/tasks", json=body, headers=headers, timeout=10)
    if answer.status_code == 201:
        httpx.post(f"{stack.url}/v1/tasks/{answer.json()['id']}/cancel", json={}, headers=headers, timeout=10)
        return True
    return False


@pytest.mark.slow
def test_an_agent_runs_a_plan_through_the_plan_tools(stack):
    async def run():
        async with stack.mcp_client() as client:
            names = {tool.name for tool in (await client.list_tools()).tools}
            assert names >= SESSION_TOOLS | PLAN_TOOLS
            devices = text_of(await client.call_tool("list_devices", {}))
            assert "amc-sim-01 (" in devices and "amc-sim-02 (" in devices and "model=Pixel 7" in devices
            steps = [{"id": "hello", "action": "shell", "args": {"command": "echo hello"}}]
            submitted = text_of(await client.call_tool("submit_plan", {"steps": steps}))
            task_id = re.search(r"task_id=(\S+?)\.", submitted).group(1)
            status = ""
            with anyio.fail_after(30):
                while "Result:" not in status:
                    status = text_of(await client.call_tool("task_status", {"task_id": task_id}))
                    await anyio.sleep(0.2)
            assert f"Task {task_id}: done." in status and "step hello: completed" in status
            refused = await client.call_tool("submit_plan", {"steps": [{"id": "x", "action": "fly"}]})
            assert refused.is_error and "Could not submit the plan" in text_of(refused) and "400" in text_of(refused)

    anyio.run(run)


@pytest.mark.slow
def test_an_agent_drives_a_phone_in_a_session_and_cancels_a_long_shell_action(stack):
    if not serves_sessions(stack):
        pytest.skip("needs Part D routes (interactive sessions) in amc serve")
    progress: list[tuple[float, float | None, str | None]] = []

    async def on_progress(done: float, total: float | None, message: str | None) -> None:
        progress.append((done, total, message))

    async def call(client, tool: str, arguments: dict, ok: bool = True):
        result = await client.call_tool(tool, arguments, progress_callback=on_progress)
        assert result.is_error is not ok, f"{tool} {arguments}: {text_of(result)}"
        return result

    async def run() -> tuple[str, str, str]:
        async with stack.mcp_client() as client:
            names = {tool.name for tool in (await client.list_tools()).tools}
            assert names >= SESSION_TOOLS

            started = text_of(await call(client, "start_session", {"model": "Pixel 7", "idle_timeout_seconds": 120}))
            session = re.search(r"session_id=(\S+?),", started).group(1)
            assert "on phone amc-sim-01" in started
            assert progress and progress[-1][2] == "phone amc-sim-01 assigned"

            launched = text_of(
                await call(client, "launch_app", {"session_id": session, "package": "com.android.settings"})
            )
            assert ": completed" in launched
            looked = await call(client, "observe", {"session_id": session})
            before = image_of(looked)
            assert '"Network & internet"' in text_of(looked) and "Network & internet" in texts(looked)

            tapped = await call(client, "tap", {"session_id": session, "text": "Network & internet"})
            assert 'tap {"target": {"text": "Network & internet"}}' in text_of(tapped)
            assert tapped.structured_content["element"]["text"] == "Network & internet"
            assert ": completed" in text_of(tapped)
            after = image_of(await call(client, "observe", {"session_id": session}))
            assert after != before and after.startswith(b"\x89PNG")
            missed = await call(client, "tap", {"session_id": session, "resource_id": "no:id/such"}, ok=False)
            assert 'no element matches resource id "no:id/such"; the screen showed: ' in text_of(missed)

            ended = text_of(await call(client, "end_session", {"session_id": session}))
            assert f"Session {session}: done." in ended and "reason: session_ended" in ended
            late = await call(client, "tap", {"session_id": session, "x": 1, "y": 1}, ok=False)
            assert "session_ended" in text_of(late) or "task_terminal" in text_of(late)

            # A second session: a long shell action, cancelled while it runs.
            started = text_of(await call(client, "start_session", {}))
            second = re.search(r"session_id=(\S+?),", started).group(1)
            running = text_of(
                await call(client, "shell", {"session_id": second, "command": "sleep 60", "wait_seconds": 1})
            )
            assert "Not finished yet" in running
            action_id = re.search(r"\(id (shell-\w+)\)", running).group(1)
            cancelled = text_of(await call(client, "cancel_task", {"task_id": second}))
            assert f"Session {second}: cancelled." in cancelled
            assert re.search(
                rf"shell {{\"command\": \"sleep 60\"}} \(id {action_id}\): interrupted, reason: ", cancelled
            )
            read = await call(client, "action_status", {"session_id": second, "action_id": action_id}, ok=False)
            assert ": interrupted, reason:" in text_of(read)

            listed = text_of(await call(client, "list_artifacts", {"task_id": session}))
            return session, second, listed

    session, second, listed = anyio.run(run)

    # The task's history and artifacts show all of it.
    headers = {"Authorization": f"Bearer {stack.token}"}
    events = httpx.get(f"{stack.url}/v1/tasks/{session}/history", headers=headers).json()["events"]
    ended = [e["data"] for e in events if e["type"] == "action_ended"]
    # launch, observe, tap, observe, the tap that found nothing
    assert [e["status"] for e in ended] == ["completed"] * 4 + ["failed"]
    assert events[-1]["type"] == "ended" and events[-1]["data"]["reason"] == "session_ended"
    artifacts = httpx.get(f"{stack.url}/v1/tasks/{session}/artifacts", headers=headers).json()["artifacts"]
    kinds = sorted(a["content_type"].split(";")[0] for a in artifacts)
    assert kinds.count("image/png") == 2
    assert all(a["id"] in listed for a in artifacts)
    second_events = httpx.get(f"{stack.url}/v1/tasks/{second}/history", headers=headers).json()["events"]
    assert [e["data"]["status"] for e in second_events if e["type"] == "action_ended"] == ["interrupted"]
    assert second_events[-1]["type"] == "ended" and second_events[-1]["data"]["status"] == "cancelled"


@pytest.mark.slow
@req("UI/s14")
def test_an_agent_loop_observes_taps_an_element_by_its_index_and_sees_the_screen_change(stack):
    """observe -> tap by index -> observe, as a model does it: the element list and the image come in one
    result, the tap names the element it hit, and the second observation shows the new screen."""

    async def run():
        async with stack.mcp_client() as client:

            async def call(tool: str, ok: bool = True, **arguments):
                result = await client.call_tool(tool, {"session_id": session, **arguments})
                assert result.is_error is not ok, f"{tool} {arguments}: {text_of(result)}"
                return result

            started = await client.call_tool("start_session", {})
            session = started.structured_content["session_id"]
            await call("launch_app", package="com.example.app")

            first = await call("observe", marks=True)
            elements = first.structured_content["elements"]
            gestures = next(element for element in elements if element["text"] == "Gestures")
            line = next(line for line in text_of(first).splitlines() if '"Gestures"' in line)
            assert line.startswith(f'[{gestures["index"]}] TextView "Gestures" ')
            assert first.structured_content["image"]["marks"] is True
            assert first.structured_content["image"]["scale"] == 0.5
            picture = image_of(first)

            tapped = await call("tap", index=gestures["index"])
            structured = tapped.structured_content
            assert structured["action_id"].startswith("tap-") and structured["status"] == "completed"
            assert structured["element"]["text"] == "Gestures" and structured["reason"] is None
            left, top, right, bottom = gestures["bounds"]
            x, y = structured["point"]
            assert left <= x < right and top <= y < bottom

            second = await call("observe")
            assert "Double-tap me" in texts(second) and "Gestures" in texts(second)
            assert "Log in" not in texts(second) and image_of(second) != picture

            # An index from that observation, after the screen changed: refused, in one sentence.
            double = next(
                element for element in second.structured_content["elements"] if element["text"] == "Double-tap me"
            )
            await call("back")
            stale = await call("tap", ok=False, index=double["index"])
            assert stale.structured_content["status"] == "failed"
            assert "the screen changed since the last observation" in stale.structured_content["reason"]

            wrong = await call("tap", ok=False, index="three")
            assert text_of(wrong).startswith("tap was called with bad arguments: index should be a valid integer")
            assert "\n" not in text_of(wrong)
            alone = await call("tap", ok=False, x=10)
            assert text_of(alone) == "tap got x alone: a point needs both x and y."
            await client.call_tool("end_session", {"session_id": session})

    anyio.run(run)


@pytest.mark.slow
@req("UI/s14")
def test_a_session_that_cannot_be_had_is_refused_with_the_servers_reason_and_left_nowhere(stack):
    headers = {"Authorization": f"Bearer {stack.token}"}

    def status_of(said: str) -> str:
        task_id = re.search(r"The request \((t_\w+)\) was cancelled", said).group(1)
        return httpx.get(f"{stack.url}/v1/tasks/{task_id}", headers=headers, timeout=10).json()["status"]

    async def run():
        async with stack.mcp_client() as client:
            nowhere = await client.call_tool("start_session", {"model": "Pixel 99"})
            assert nowhere.is_error
            said = text_of(nowhere)
            assert said.startswith("No session: no registered phone meets its requirements (waiting: no_device_matches")
            assert "matching_devices: 0, requirements: model=Pixel 99), at once." in said
            assert status_of(said) == "cancelled"

            held = [await client.call_tool("start_session", {}) for _ in range(2)]
            try:
                busy = await client.call_tool("start_session", {"wait_seconds": 1})
                assert busy.is_error
                said = text_of(busy)
                assert "(waiting: matching_devices_busy, matching_devices: 2, requirements: any phone)" in said
                assert status_of(said) == "cancelled"
            finally:
                for started in held:
                    await client.call_tool("end_session", {"session_id": started.structured_content["session_id"]})

    anyio.run(run)


@pytest.mark.slow
def test_the_readme_transcript_comes_from_the_example_agent_as_it_runs(stack):
    if not serves_sessions(stack):
        pytest.skip("needs Part D routes (interactive sessions) in amc serve")
    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "AMC_URL": stack.url, "AMC_TOKEN": stack.token}
    run = subprocess.run(
        [sys.executable, str(root / "examples" / "mcp_agent.py")], env=env, capture_output=True, text=True, timeout=120
    )
    assert run.returncode == 0, run.stderr
    transcript = run.stdout
    for line in (
        '→ observe({"session_id": ',
        '← [1] EditText "Username" id=com.example.app:id/username bounds=[0,200][1080,400] clickable',
        '← Action #3 type {"text": "ada", "clear": true, "target": {"index": 1}} (id type-',
        '← Element: [2] Button "Log in" id=com.example.app:id/login bounds=[54,450][1026,550] clickable',
        '← Element: [1] TextView "Signed in as ada" id=com.example.app:id/greeting',
        "← [image: image/png, ",
        "← Result: done, reason: session_ended",
    ):
        assert line in transcript
    readme = (root / "README.md").read_text(encoding="utf-8")
    assert "examples/mcp_agent.py" in readme and "← Result: done, reason: session_ended" in readme


@pytest.mark.slow
@req("RECORD/s5")
def test_an_agent_records_a_session_and_gets_the_mp4_as_an_artifact_of_the_session(stack):
    """start_recording, a tap, stop_recording: the result names the mp4 stored for the session task, and
    its download path serves a playable file; the tool result itself carries no video."""

    async def run():
        async with stack.mcp_client() as client:

            async def call(tool: str, ok: bool = True, **arguments):
                result = await client.call_tool(tool, {"session_id": session, **arguments})
                assert result.is_error is not ok, f"{tool} {arguments}: {text_of(result)}"
                return result

            started = await client.call_tool("start_session", {})
            session = started.structured_content["session_id"]
            try:
                recording = await call("start_recording")
                assert recording.structured_content["recording"] == "started"
                await call("launch_app", package="com.example.app")
                await call("tap", text="Gestures")
                stopped = await call("stop_recording")
                again = await call("stop_recording", ok=False)
                assert "not recording" in text_of(again)
                listed = text_of(await client.call_tool("list_artifacts", {"task_id": session}))
            finally:
                await client.call_tool("end_session", {"session_id": session})
            return session, stopped, listed

    session, stopped, listed = anyio.run(run)
    assert [part.type for part in stopped.content] == ["text"]
    (video,) = stopped.structured_content["recordings"]
    assert video["content_type"] == "video/mp4" and video["name"].endswith("-record.mp4") and video["size"] > 0
    assert video["url"] == f"/v1/tasks/{session}/artifacts/{video['artifact_id']}"
    assert f"Recording {video['artifact_id']}: " in text_of(stopped) and video["url"] in text_of(stopped)
    assert f"{video['artifact_id']}: {video['name']} (video/mp4, {video['size']} bytes)" in listed
    headers = {"Authorization": f"Bearer {stack.token}"}
    data = httpx.get(f"{stack.url}{video['url']}", headers=headers, timeout=10).content
    assert len(data) == video["size"] and data[4:8] == b"ftyp"
