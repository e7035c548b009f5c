"""The web console in headless Chromium, against a running stack with simulated phones."""

from __future__ import annotations

import json
import re
import time

import pytest
from playwright.sync_api import expect

from amc.sim import SimDeviceSpec
from amc.sim.screens import current_screen, hierarchy_xml, screenshot_png
from tests.browser.conftest import snapshot
from tests.support.waiting import eventually

pytestmark = [pytest.mark.slow, pytest.mark.timeout(180)]

LONG_WAIT = {
    "steps": [
        {"id": "open", "action": "launch", "args": {"package": "com.android.settings"}},
        {"id": "hold", "action": "wait", "args": {"seconds": 60}},
        {"id": "look", "action": "screenshot", "args": {}},
    ]
}


def running_step(caller, task_id: str, step: str) -> dict:
    """The task once its current attempt reports `step` running."""

    def probe():
        task = caller.task(task_id)
        attempt = task["attempts"][-1] if task["attempts"] else None
        return attempt and (attempt["progress"] or {}).get("step") == step and task

    return eventually(probe, timeout=30, interval=0.1, what=f"{task_id} running {step}")


@pytest.mark.req("CONSOLE/s1")
def test_without_a_token_the_sign_in_page_shows_and_a_token_signs_in(stack, page):
    response = page.goto(stack.url + "/")
    assert page.url == stack.console  # `/` redirects to the console
    assert "default-src 'self'" in response.headers["content-security-policy"]
    expect(page.locator("#sign-in")).to_be_visible()
    expect(page.locator("#nav")).to_be_hidden()
    snapshot(page, "sign-in")
    page.fill("#token", "not-a-token")
    page.click("#sign-in button[type=submit]")
    expect(page.locator("#sign-in-error")).to_have_text("The server refused the token.")
    page.fill("#token", stack.tokens["acme"])
    page.click("#sign-in button[type=submit]")
    expect(page.locator("#fleet-counts")).to_be_visible()
    page.click("#sign-out")
    expect(page.locator("#sign-in")).to_be_visible()
    assert page.evaluate("sessionStorage.length") == 0


@pytest.mark.req("CONSOLE/s2")
def test_the_fleet_shows_the_phones_and_a_busy_one_links_to_its_task(stack, page, sign_in):
    task = stack.acme.submit(LONG_WAIT, labels={"suite": "fleet"})
    running_step(stack.acme, task["id"], "hold")
    sign_in(page, stack.tokens["acme"], "#/fleet")
    host = page.locator("[data-host=h1]")
    expect(host.locator("tr[data-serial]")).to_have_count(2)
    busy = host.locator("tr[data-state=busy]")
    expect(busy.locator(".step")).to_have_text("hold")
    expect(page.locator("[data-count=busy] strong")).to_have_text("1")
    expect(page.locator("[data-host=h1] h2 .badge")).to_have_text("online")
    snapshot(page, "fleet")
    busy.locator("a.task-link").click()
    expect(page.locator("#task-id")).to_have_text(task["id"])
    stack.acme.cancel(task["id"])
    stack.acme.wait_status(task["id"], "cancelled", timeout=30)


@pytest.mark.req("CONSOLE/s3")
def test_a_finished_task_shows_its_screenshot_and_its_ui_dump(stack, page, sign_in):
    """The artifacts are uploaded as a Host Agent uploads them (host h9, over the API)."""
    stack.h9.register("h9", [{"serial": "h9-phone", "attributes": {"model": "Pixel 8"}}])
    plan = {"steps": [{"id": "look", "action": "screenshot"}, {"id": "tree", "action": "ui_dump"}]}
    task = stack.acme.submit(plan, requirements={"serial": "h9-phone"}, labels={"suite": "evidence"})
    lease = stack.h9.claim("h9", devices=["h9-phone"])
    assert lease["task_id"] == task["id"]
    stack.h9.start(task["id"], lease["attempt"], lease["lease_id"])
    phone = SimDeviceSpec(serial="h9-phone", model="Pixel 8")
    screen = current_screen(phone, "com.android.settings", "")  # what the simulator shows and dumps
    stack.h9.upload(
        task["id"],
        1,
        lease["lease_id"],
        "look.png",
        screenshot_png(phone, screen),
        step="look",
        content_type="image/png",
    )
    dump = hierarchy_xml(screen).decode()
    stack.h9.upload(
        task["id"], 1, lease["lease_id"], "tree.xml", dump.encode(), step="tree", content_type="application/xml"
    )
    steps = [
        {
            "id": "look",
            "status": "completed",
            "started_at": "2026-01-01T00:00:00.000Z",
            "ended_at": "2026-01-01T00:00:00.250Z",
        },
        {
            "id": "tree",
            "status": "completed",
            "started_at": "2026-01-01T00:00:00.250Z",
            "ended_at": "2026-01-01T00:00:01.000Z",
        },
    ]
    stack.h9.report(task["id"], 1, lease["lease_id"], "done", steps=steps)
    sign_in(page, stack.tokens["acme"], f"#/task/{task['id']}")
    image = page.locator("[data-step=look] img.screenshot")
    expect(image).to_be_visible()
    assert image.evaluate("img => img.complete && img.naturalWidth") == phone.width
    expect(page.locator("[data-step=tree] pre.artifact-text")).to_have_text(dump)
    expect(page.locator("[data-step=look]")).to_contain_text("250 ms")
    expect(page.locator("#task-status")).to_have_text("done")
    snapshot(page, "task", full_page=True)


@pytest.mark.req("CONSOLE/s4")
def test_cancel_from_the_page_ends_a_running_task_cancelled_with_the_interrupted_step(stack, page, sign_in):
    task = stack.acme.submit(LONG_WAIT, labels={"suite": "cancel"})
    running_step(stack.acme, task["id"], "hold")
    sign_in(page, stack.tokens["acme"], f"#/task/{task['id']}")
    expect(page.locator("#task-status")).to_have_text("dispatched")
    page.fill("#cancel-reason", "seen enough")
    page.click("#action-cancel")
    page.click("#confirm-cancel")  # the confirmation: a cancellation cannot be undone
    expect(page.locator("#task-status")).to_have_text("cancelled", timeout=30_000)
    expect(page.locator("[data-step=hold]")).to_have_attribute("data-status", "interrupted")
    expect(page.locator("[data-step=look]")).to_have_attribute("data-status", "not_started")
    expect(page.locator("#cancellation")).to_contain_text("seen enough")
    snapshot(page, "task-cancelled")


@pytest.mark.req("CONSOLE/s4")
def test_skip_pause_and_resume_from_the_page_steer_a_running_task(stack, page, sign_in):
    """While `hold` runs: skip `look` (confirmed) and pause; at the boundary the agent admits
    both and the page reads paused; resume from the page, and the task ends done with `look`
    not started, steered."""
    plan = {
        "steps": [
            {"id": "hold", "action": "wait", "args": {"seconds": 5}},
            {"id": "look", "action": "screenshot"},
            {"id": "tree", "action": "ui_dump"},
        ]
    }
    task = stack.acme.submit(plan, labels={"suite": "steer"})
    running_step(stack.acme, task["id"], "hold")
    sign_in(page, stack.tokens["acme"], f"#/task/{task['id']}")
    page.select_option("#skip-step", "look")
    page.click("#action-skip")
    page.click("#confirm-skip")
    expect(page.locator("#action-note")).to_have_text("Skip step: accepted.")
    page.click("#action-pause")
    expect(page.locator("#task-status .badge.paused")).to_be_visible(timeout=30_000)
    page.click("#action-resume")
    expect(page.locator("#task-status")).to_have_text("done", timeout=30_000)
    expect(page.locator("[data-step=look]")).to_have_attribute("data-status", "not_started")
    expect(page.locator("[data-step=look] .reason")).to_have_text("steered")
    expect(page.locator("[data-step=tree]")).to_have_attribute("data-status", "completed")
    intents = [(m["intent"], m["data"], m["state"]) for m in stack.acme.messages(task["id"])]
    assert intents == [
        ("steer", {"skip": ["look"]}, "completed"),
        ("pause", None, "completed"),
        ("resume", None, "completed"),
    ]


@pytest.mark.req("CONSOLE/s5")
def test_a_status_change_appears_without_a_reload(stack, page, sign_in):
    task = stack.acme.submit(requirements={"serial": "no-such-phone"}, labels={"suite": "live"})
    sign_in(page, stack.tokens["acme"], f"#/task/{task['id']}")
    expect(page.locator("#task-status")).to_have_text("queued")
    expect(page.locator("#waiting")).to_contain_text("no device matches")
    page.fill("#follow-up-text", "then look again")
    page.click("#action-follow-up")
    page.click("#confirm-follow-up")  # a follow-up cannot be taken back: the page asks first
    follow_up = page.locator("#messages tr", has_text="then look again")
    expect(follow_up).to_contain_text("queued")
    page.fill("#cancel-reason", "half typed")  # a refresh must not take this away
    stack.acme.post_message(task["id"], "pause")
    expect(page.locator("#messages tr", has_text="pause")).to_contain_text("completed")  # the server holds it at once
    expect(page.locator("#cancel-reason")).to_have_value("half typed")
    expect(page.locator("#cancel-reason")).to_be_focused()
    page.evaluate("window.notReloaded = true")
    stack.acme.cancel(task["id"], expect=200)
    expect(page.locator("#task-status")).to_have_text("cancelled")
    expect(follow_up).to_contain_text("not_admitted")  # the task ended cancelled: no successor
    assert page.evaluate("window.notReloaded") is True


@pytest.mark.req("CONSOLE/s6")
def test_user_strings_show_as_text_and_run_nothing(stack, page, sign_in):
    script = "<script>alert(1)</script>"
    task = stack.acme.submit(
        {"steps": [{"id": "<img src=x onerror=alert(2)>", "action": "wait", "args": {"seconds": 0}}]},
        requirements={"serial": "no-such-phone"},
        labels={"suite": script},
    )
    stack.acme.post_message(task["id"], "follow_up", text=script)
    sign_in(
        page,
        stack.tokens["acme"],
        "#/tasks?label=" + re.sub("[<>/()]", lambda m: f"%{ord(m[0]):02X}", f"suite={script}"),
    )
    row = page.locator(f"tr[data-task='{task['id']}']")
    expect(row).to_contain_text(f"suite={script}")
    row.locator("a.task-link").click()
    expect(page.locator("#messages")).to_contain_text(script)
    expect(page.locator("#steps")).to_contain_text("<img src=x onerror=alert(2)>")
    assert page.locator("main script, main img:not(.screenshot)").count() == 0
    # (the `page` fixture fails the test if any dialog opened)


@pytest.mark.req("CONSOLE/s7")
def test_another_tenants_task_is_not_found(stack, page, sign_in):
    task = stack.acme.submit(requirements={"serial": "no-such-phone"})
    sign_in(page, stack.tokens["globex"], f"#/task/{task['id']}")
    expect(page.locator("#task-error")).to_have_text("Task not found.")
    page.goto(stack.console + "#/tasks")
    expect(page.locator("#task-list")).to_be_visible()
    assert task["id"] not in page.locator("#task-list").inner_text()


def test_the_task_list_filters_by_label_and_the_submit_page_names_the_bad_step(stack, page, sign_in):
    ids = [stack.acme.submit(requirements={"serial": "no-such-phone"}, labels={"batch": "b1"})["id"] for _ in range(3)]
    sign_in(page, stack.tokens["acme"], "#/tasks?label=batch%3Db1")
    rows = page.locator("#task-list tr[data-task]")
    expect(rows).to_have_count(3)
    assert [rows.nth(n).get_attribute("data-task") for n in range(3)] == ids[::-1]  # newest first
    expect(rows.first).to_contain_text("no device matches")
    page.click("a[data-page=tasks]")  # every task of the tenant, in every status, for the picture
    expect(page.locator("#task-list tr[data-task]").nth(2)).to_be_visible()
    snapshot(page, "tasks")
    page.click("a[data-page=submit]")
    bad = {
        "plan": {
            "steps": [
                {"id": "open", "action": "launch", "args": {"package": "com.android.settings"}},
                {"id": "poke", "action": "tap", "args": {"x": 540}},
            ]
        },
        "labels": {"from": "console"},
    }
    page.fill("#plan-editor", json.dumps(bad, indent=2))
    page.click("#submit-plan")
    expect(page.locator("li[data-step=poke] .step-error")).to_contain_text("requires argument 'y'")
    expect(page.locator("li[data-step=open] .step-error")).to_have_count(0)
    snapshot(page, "submit")
    for task_id in ids:
        stack.acme.cancel(task_id)

    # Paging along the API's cursor: 50 a page, newest first; back returns to the page before.
    many = [
        stack.acme.submit(requirements={"serial": "no-such-phone"}, labels={"batch": "b2"})["id"] for _ in range(51)
    ]
    page.goto(stack.console + "#/tasks?label=batch%3Db2")
    expect(rows).to_have_count(50)
    expect(rows.first).to_have_attribute("data-task", many[-1])
    page.click("#page-next")
    expect(rows).to_have_count(1)
    expect(rows.first).to_have_attribute("data-task", many[0])
    expect(page.locator("#page-next")).to_have_count(0)
    page.click("#page-back")
    expect(rows).to_have_count(50)
    for task_id in many:
        stack.acme.cancel(task_id)


def test_the_event_parser_reads_events_split_anywhere(stack, page):
    """The console's SSE parser (live.js): events cut at any byte, CRLF lines, comments, ids."""
    page.goto(stack.console)
    events = page.evaluate(
        """async () => {
        const { SseParser } = await import("/ui/live.js");
        const seen = [];
        const parser = new SseParser((type, data, id) => seen.push([type, data, id]));
        const text = ': keep-alive\\n\\nid: 1-1\\nevent: task\\ndata: {"id": "t1",\\ndata:  "status": "done"}\\n\\n' +
          'event: reset\\r\\nid: 1-2\\r\\ndata: {}\\r\\n\\r\\n: keep-alive\\n\\ndata: x\\n';
        for (let i = 0; i < text.length; i += 3) parser.push(text.slice(i, i + 3));
        return seen;
    }"""
    )
    assert events == [["task", '{"id": "t1",\n "status": "done"}', "1-1"], ["reset", "{}", "1-2"]]


@pytest.mark.req("CONSOLE/s5")
def test_with_the_event_stream_a_page_updates_live(stack, page, sign_in):
    """Once GET /v1/events exists, a page follows it (the indicator reads "live") rather than a timer."""
    with stack.http.stream("GET", "/v1/events", headers={"Authorization": f"Bearer {stack.tokens['acme']}"}) as probe:
        absent = probe.status_code == 404  # (the body of a stream that exists is never read)
    if absent:
        pytest.skip("this server has no GET /v1/events yet: the console re-reads on a timer (tested above)")
    task = stack.acme.submit(requirements={"serial": "no-such-phone"}, labels={"suite": "stream"})
    sign_in(page, stack.tokens["acme"], f"#/task/{task['id']}")
    expect(page.locator("#live")).to_have_text("live")
    expect(page.locator("#task-status")).to_have_text("queued")
    stack.acme.cancel(task["id"], expect=200)
    expect(page.locator("#task-status")).to_have_text("cancelled", timeout=3_000)


def test_the_page_follows_the_event_stream_and_resumes_it_with_last_event_id(stack, page, sign_in):
    """The stream as its contract says (served here by the browser itself, so this runs with
    or without the server's): read with the token, an event re-reads the page, and a dropped
    stream is asked again from the last id it delivered."""
    task = stack.acme.submit(requirements={"serial": "no-such-phone"}, labels={"suite": "resume"})
    asked: list[dict] = []

    def serve_events(route):
        asked.append(route.request.headers)
        view = stack.acme.task(task["id"])
        body = (
            f": keep-alive\n\nid: 7-{len(asked)}\nevent: task\ndata: {json.dumps(view)}\n\n" if len(asked) < 3 else ""
        )
        route.fulfill(status=200, headers={"Content-Type": "text/event-stream"}, body=body)

    page.route("**/v1/events", serve_events)
    reads: list[str] = []
    page.on("request", lambda request: reads.append(request.url) if request.url.endswith("/" + task["id"]) else None)
    sign_in(page, stack.tokens["acme"], f"#/task/{task['id']}")
    expect(page.locator("#task-status")).to_have_text("queued")
    while_browsing(page, lambda: len(asked) >= 3, "the stream asked three times")
    assert all(headers["authorization"] == f"Bearer {stack.tokens['acme']}" for headers in asked)
    assert "last-event-id" not in asked[0]
    assert [headers.get("last-event-id") for headers in asked[1:3]] == ["7-1", "7-2"]
    while_browsing(page, lambda: len(reads) >= 3, "the task re-read after its events")
    stack.acme.cancel(task["id"], expect=200)


def while_browsing(tab, probe, what: str, timeout: float = 15.0) -> None:
    """Wait for `probe()` while Playwright runs the page's handlers (a plain sleep would not)."""
    deadline = time.monotonic() + timeout
    while not probe():
        assert time.monotonic() < deadline, f"{what}: not within {timeout} s"
        tab.wait_for_timeout(50)


@pytest.mark.req("BOUNDED/s1")
def test_a_page_whose_stream_falls_silent_notices_and_asks_again(stack, page, sign_in):
    """A stream that said its keep-alive interval (0.2 s here) and then nothing, not even a
    keep-alive, is aborted after twice that and asked again; once the real stream answers,
    the page is live."""
    from tests.cli.test_bounded import SILENT_STREAM, Mute

    silent = Mute(head=SILENT_STREAM)
    try:
        page.route("**/v1/events", lambda route: route.continue_(url=silent.url + "/v1/events"))
        sign_in(page, stack.tokens["acme"])
        while_browsing(page, lambda: silent.connections >= 3, "the silent stream asked again twice")
        page.unroute("**/v1/events")
        expect(page.locator("#live")).to_have_text("live")
    finally:
        silent.close()


@pytest.mark.req("CONSOLE/s8")
def test_a_recording_plays_inline_and_a_pulled_file_downloads_with_the_token(stack, page, sign_in):
    """The simulator records the steps between `rec` and `cut` as an H.264 mp4; the pulled file
    is the pushed fixture read back. Neither can be read without the token, so the page plays
    and saves them from blobs it fetched itself."""
    fixture = bytes(range(256)) * 40  # binary bytes: a text decoding on the way would change them
    ref = {"input": stack.acme.call("POST", "/v1/inputs", content=fixture, expect=201)["ref"]}
    path = "/sdcard/Download/fixture.bin"
    plan = {
        "steps": [
            {"id": "rec", "action": "record", "args": {"mode": "start"}},
            {"id": "home", "action": "home", "args": {}},
            {"id": "pause", "action": "wait", "args": {"seconds": 0.5}},
            {"id": "cut", "action": "record", "args": {"mode": "stop"}},
            {"id": "push", "action": "push", "args": {"input": ref, "path": path}},
            {"id": "pull", "action": "pull", "args": {"path": path}},
        ]
    }
    task = stack.acme.submit(plan, labels={"suite": "media"})
    done = stack.acme.wait_status(task["id"], "done", "failed", timeout=60)
    assert done["status"] == "done", done
    [pulled] = [a for a in stack.acme.artifacts(task["id"]) if a["step"] == "pull"]

    sign_in(page, stack.tokens["acme"], f"#/task/{task['id']}")
    video = page.locator("[data-step=cut] video.recording")
    expect(video).to_be_visible()
    assert video.get_attribute("src").startswith("blob:")
    page.wait_for_function("v => v.readyState >= 1 && (v.duration > 0 || v.videoWidth > 0)", arg=video.element_handle())
    assert video.evaluate("v => v.videoWidth") == 1080

    link = page.locator("[data-step=pull] a.download")
    expect(link).to_have_text("download " + pulled["name"])
    with page.expect_download() as saving:
        link.click()
    download = saving.value
    assert download.suggested_filename == pulled["name"]
    with open(download.path(), "rb") as saved:
        assert saved.read() == fixture
