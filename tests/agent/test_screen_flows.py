"""On-screen actions end to end: plans that act on what the screen shows, run by a Host Agent
on the simulator's example app (a Maestro-like flow, the same flow failing where a text is
missing, a set-of-marks screenshot, and an index action refused after the screen changed)."""

from __future__ import annotations

import io
import json

import pytest
from PIL import Image

from tests.agent.helpers import outcomes

req = pytest.mark.req

USERNAME = {"resource_id": "com.example.app:id/username"}
MARK_COLOUR = (255, 0, 110)  # what the executor draws marks in (amc.adapters.adb.frames)


def step(step_id: str, action: str, **args) -> dict:
    return {"id": step_id, "action": action, "args": args}


def login_flow(button: str = "Log in") -> list[dict]:
    """Launch the example app, sign in as alice (over text typed before), find Item 30, come back."""
    return [
        step("launch", "launch", package="com.example.app"),
        step("ready", "wait_for", target=USERNAME, timeout_seconds=5),
        step("draft", "type", text="bob", target=USERNAME),
        step("name", "type", text="alice", target=USERNAME, clear=True),
        step("login", "tap", target={"text": button}),
        step("greeting", "wait_for", target={"text": "Signed in as alice"}, timeout_seconds=5),
        step("back", "back"),
        step("catalogue", "tap", target={"text": "Catalogue"}),
        step("find", "scroll_until_visible", target={"text": "Item 30"}, direction="down", max_swipes=10),
        step("seen", "assert_visible", target={"text": "Item 30"}),
        step("leave", "back"),
        step("main", "assert_visible", target={"resource_id": "com.example.app:id/catalogue"}),
    ]


def outputs(task: dict) -> dict[str, dict]:
    """Each completed step's JSON output, by step id."""
    return {s["id"]: json.loads(s["output"]) for s in task["result"]["steps"] if s.get("output", "").startswith("{")}


@req("UI/s2", "UI/s5", "UI/s6", "UI/s7", "UI/s8")
def test_a_maestro_like_flow_runs_to_done(server, sim, make_agent):
    make_agent(server.url, sim.server_port)
    plan = {"steps": login_flow()}

    task = server.api.wait_status(server.api.submit(plan)["id"], timeout=60)

    assert task["status"] == "done", task
    assert outcomes(task["result"]["steps"]) == [(s["id"], "completed", None) for s in plan["steps"]]
    out = outputs(task)
    login = out["login"]
    assert (login["element"]["class"], login["element"]["text"]) == ("android.widget.Button", "Log in")
    left, top, right, bottom = login["element"]["bounds"]
    assert left <= login["point"][0] < right and top <= login["point"][1] < bottom
    assert out["name"]["element"]["resource_id"] == "com.example.app:id/username"
    assert out["greeting"]["element"]["resource_id"] == "com.example.app:id/greeting"
    assert out["find"]["element"]["text"] == "Item 30" and out["find"]["swipes"] >= 1
    device = sim.device("amc-sim-01")
    assert device.app_fields("com.example.app")["com.example.app:id/username"] == "alice"  # clear replaced "bob"
    assert device.foreground == "com.example.app/.MainActivity"


@req("UI/s3")
def test_the_flow_with_a_missing_text_fails_at_that_step_saying_what_the_screen_showed(server, sim, make_agent):
    make_agent(server.url, sim.server_port)
    plan = {"steps": login_flow(button="Sign in")}

    task = server.api.wait_status(server.api.submit(plan)["id"], timeout=60)

    assert task["status"] == "failed", task
    steps = {s["id"]: s for s in task["result"]["steps"]}
    assert [s["id"] for s in task["result"]["steps"] if s["status"] == "completed"] == [
        "launch",
        "ready",
        "draft",
        "name",
    ]
    reason = steps["login"]["reason"]
    assert steps["login"]["status"] == "failed"
    assert reason.startswith('no element matches text "Sign in"; the screen showed: "Example", "alice", "Log in", ')
    assert reason.endswith(" elements)")
    assert {steps[s["id"]]["status"] for s in plan["steps"][5:]} == {"not_started"}
    assert sim.device("amc-sim-01").foreground == "com.example.app/.MainActivity"  # nothing was tapped


@req("UI/s11")
def test_a_set_of_marks_screenshot_boxes_the_elements_of_its_list(server, sim, make_agent):
    make_agent(server.url, sim.server_port)
    plan = {
        "steps": [
            step("launch", "launch", package="com.example.app"),
            step("ready", "wait_for", target=USERNAME, timeout_seconds=5),
            step("plain", "screenshot"),
            step("marked", "screenshot", marks=True),
        ]
    }

    task = server.api.wait_status(server.api.submit(plan)["id"], timeout=60)

    assert task["status"] == "done", task
    shots = {a["step"]: server.api.download(task["id"], a["id"]).content for a in server.api.artifacts(task["id"])}
    plain, marked = (Image.open(io.BytesIO(shots[name])).convert("RGB") for name in ("plain", "marked"))
    listed = outputs(task)["marked"]
    assert listed["image"] == {"width": 1080, "height": 2400, "format": "png", "scale": 1, "marks": True}
    elements = listed["elements"]
    assert [e["text"] for e in elements if e["text"]][:3] == ["Example", "Username", "Log in"]
    assert MARK_COLOUR not in {plain.getpixel((x, y)) for x in range(0, 1080, 7) for y in range(0, 2400, 7)}
    for element in elements:  # every element's box lies on its bounds
        left, top, right, bottom = element["bounds"]
        middle_x, middle_y = (left + right) // 2, (top + bottom) // 2
        for point in ((left, middle_y), (right - 1, middle_y), (middle_x, bottom - 1)):
            assert marked.getpixel(point) == MARK_COLOUR, (element, point)

    def near_a_box(x: int, y: int) -> bool:
        for element in elements:
            left, top, right, bottom = element["bounds"]
            inside = left - 2 <= x < right + 2 and top - 2 <= y < bottom + 2
            on_edge = min(abs(x - left), abs(x - (right - 1)), abs(y - top), abs(y - (bottom - 1))) <= 2
            at_label = left - 2 <= x < left + 60 and top - 16 <= y < top + 16  # the number by the corner
            if (inside and on_edge) or at_label:
                return True
        return False

    stray = [
        (x, y)
        for x in range(0, 1080, 3)
        for y in range(0, 2400, 3)
        if marked.getpixel((x, y)) == MARK_COLOUR and not near_a_box(x, y)
    ]
    assert stray == [], "magenta away from every element's box"
    unmarked = [
        (x, y)
        for x in range(0, 1080, 5)
        for y in range(0, 2400, 5)
        if marked.getpixel((x, y)) != plain.getpixel((x, y)) and not near_a_box(x, y)
    ]
    assert unmarked == [], "the marks changed the picture away from the boxes"


@req("UI/s4")
def test_an_index_action_after_the_screen_changed_is_refused(server, sim, make_agent):
    make_agent(server.url, sim.server_port)
    plan = {
        "steps": [
            step("launch", "launch", package="com.example.app"),
            step("ready", "wait_for", target=USERNAME, timeout_seconds=5),
            step("look", "ui_tree"),
            step("open", "tap", target={"text": "Gestures"}),
            step("stale", "tap", target={"index": 2}),
        ]
    }

    task = server.api.wait_status(server.api.submit(plan)["id"], timeout=60)

    assert task["status"] == "failed", task
    steps = {s["id"]: s for s in task["result"]["steps"]}
    assert [e["text"] for e in outputs(task)["look"]["elements"]][:3] == ["Example", "Username", "Log in"]
    assert steps["open"]["status"] == "completed"
    assert (steps["stale"]["status"], steps["stale"]["reason"]) == (
        "failed",
        "the screen changed since the last observation; observe again before acting by index",
    )
    assert sim.device("amc-sim-01").foreground == "com.example.app/.GestureActivity"  # the stale tap did nothing


@req("UI/s7")
@pytest.mark.parametrize("ime", [True, False])
def test_non_ascii_text_is_typed_through_the_broadcast_ime_and_only_there(server, make_sim, make_agent, ime):
    sim = make_sim("amc-sim-01", broadcast_ime=ime)
    make_agent(server.url, sim.server_port)
    plan = {
        "steps": [
            step("launch", "launch", package="com.example.app"),
            step("draft", "type", text="bob", target=USERNAME),
            step("name", "type", text="Zoë 😀", target=USERNAME, clear=True),
            step("login", "tap", target={"text": "Log in"}),
            step("greeting", "wait_for", target={"text": "Signed in as Zoë 😀"}, timeout_seconds=5),
        ]
    }

    task = server.api.wait_status(server.api.submit(plan)["id"], timeout=60)

    fields = sim.device("amc-sim-01").app_fields("com.example.app")
    if ime:
        assert task["status"] == "done", task
        assert fields["com.example.app:id/username"] == "Zoë 😀"
        return
    assert task["status"] == "failed", task
    name = {s["id"]: s for s in task["result"]["steps"]}["name"]
    assert (name["status"], name["reason"]) == (
        "failed",
        "typing non-ASCII text needs the ADB keyboard (com.android.adbkeyboard/.AdbIME) as the input method; "
        "the device's is com.google.android.inputmethod.latin/com.android.inputmethod.latin.LatinIME",
    )
    assert fields["com.example.app:id/username"] == "bob"  # nothing was cleared or typed


@req("UI/s6", "UI/s8", "UI/s10")
def test_gestures_waits_and_device_actions_on_the_example_app(server, sim, make_agent):
    make_agent(server.url, sim.server_port)
    plan = {
        "steps": [
            step("launch", "launch", package="com.example.app"),
            step("slow", "tap", target={"text": "Slow page"}),
            step("loading", "wait_for", target={"text": "Loading…"}, gone=True, timeout_seconds=5),
            step("ready", "assert_visible", target={"resource_id": "com.example.app:id/status", "nth": 0}),
            step("up", "back"),
            step("gestures", "tap", target={"text": "Gestures"}),
            step("twice", "double_tap", target={"text": "Double-tap me"}),
            step("doubled", "assert_visible", target={"text": "Double-tapped"}),
            step("hold", "long_press", target={"text": "Press and hold"}, duration_ms=600),
            step("menu", "assert_visible", target={"text": "Copy"}),
            step("close", "back"),
            step("closed", "assert_not_visible", target={"text": "Copy"}),
            step("turn", "set_orientation", orientation="landscape"),
            step("wide", "ui_tree"),
            step("upright", "set_orientation", orientation="portrait"),
            step("apps", "list_apps", third_party=False),
            step("web", "open_url", url="https://example.org/docs"),
            step("address", "assert_visible", target={"text": "https://example.org/docs"}),
            step("stop", "stop_app", package="com.android.chrome"),
            step("wipe", "clear_app_data", package="com.example.app"),
        ]
    }

    task = server.api.wait_status(server.api.submit(plan)["id"], timeout=60)

    assert task["status"] == "done", task
    out = outputs(task)
    assert out["loading"]["gone"] is True
    assert out["twice"]["element"]["text"] == "Double-tap me"
    assert out["hold"]["element"]["text"] == "Press and hold"
    assert out["wide"]["screen"] == {"width": 2400, "height": 1080, "rotation": 1}
    packages = {p["package"]: p["third_party"] for p in out["apps"]["packages"]}
    assert packages["com.example.app"] is True and packages["com.android.settings"] is False
    device = sim.device("amc-sim-01")
    assert device.foreground == "com.android.launcher3/.Launcher"  # Chrome stopped: home again
    assert device.app_fields("com.example.app") == {}
    assert [r.command for r in sim.log("amc-sim-01") if "user_rotation" in r.command][-1].endswith("user_rotation 0")
