"""A step's evidence, stored in the control plane by the Host Agent (specs/protocol.md Part C,
"The Host Agent and artifacts"): a real agent, a real server on a socket, the simulated
device through the real executor; every artifact read back over HTTP.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import hashlib
import struct
import tempfile
import time
import xml.etree.ElementTree as ElementTree
import zlib
from pathlib import Path

import pytest

from amc.adapters.adb.client import BoundedClient
from amc.adapters.adb.executor import AdbExecutor
from amc.agent.attempt import Attempt
from amc.agent.client import ControlPlane, Rejected
from amc.agent.clock import ServerClock
from amc.agent.evidence import Evidence, Stored, artifact_name
from amc.agent.wire import INLINE_OUTPUT_CHARS, TRUNCATED, ClaimedAttempt
from amc.core.execution import StopReason
from amc.core.records import Plan, Step
from tests.agent.helpers import device_log, eventually, shell, wait_running

req = pytest.mark.req

LAUNCH = {"id": "open", "action": "launch", "args": {"package": "com.android.settings"}}
SHOT = {"id": "shot", "action": "screenshot", "args": {}}
UI = {"id": "ui", "action": "ui_dump", "args": {}}
LOG = {"id": "log", "action": "logcat", "args": {"lines": 50}}
LINES = [f"line {i:05d}" for i in range(2000)]  # 22 000 characters: more than the report carries inline
LONG = shell("long", "; ".join(f"echo '{line}'" for line in LINES))
FULL_OUTPUT = "".join(line + "\n" for line in LINES)


def check_png(data: bytes) -> tuple[int, int]:
    """The width and height of a PNG whose signature and IHDR chunk (with its CRC) are right."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG signature"
    length, kind = struct.unpack(">I4s", data[8:16])
    assert (length, kind) == (13, b"IHDR"), "the first chunk is not IHDR"
    header = data[16 : 16 + length]
    (crc,) = struct.unpack(">I", data[16 + length : 20 + length])
    assert crc == zlib.crc32(kind + header), "IHDR's CRC is wrong"
    width, height = struct.unpack(">II", header[:8])
    assert width > 0 and height > 0
    assert data.endswith(b"IEND\xaeB`\x82"), "no IEND chunk at the end"
    return width, height


def step_artifacts(task: dict) -> dict[str, list[str]]:
    return {step["id"]: step.get("artifacts", []) for step in task["result"]["steps"]}


def temporary_dirs(task_id: str) -> list[Path]:
    return list(Path(tempfile.gettempdir()).glob(f"amc-{task_id}-*"))


@req("AGENT-EVIDENCE/s1", "AGENT-EVIDENCE/s4")
def test_each_steps_evidence_is_stored_listed_with_its_step_and_reads_back(server, sim, make_agent):
    agent = make_agent(server.url, sim.server_port)
    plan = {"steps": [LAUNCH, SHOT, UI, LOG, LONG, shell("short", "echo short")]}
    task_id = server.api.submit(plan)["id"]

    task = server.api.wait_status(task_id)

    assert task["status"] == "done", task
    stored = server.api.artifacts(task_id)
    assert [(a["step"], a["name"], a["content_type"].split(";")[0]) for a in stored] == [
        ("shot", "shot-screenshot.png", "image/png"),
        ("ui", "ui-ui_dump.xml", "application/xml"),
        ("log", "log-logcat.txt", "text/plain"),
        ("long", "long-output.txt", "text/plain"),
    ]
    assert all(a["attempt"] == 1 for a in stored)
    assert step_artifacts(task) == {
        "open": [],
        "shot": [stored[0]["id"]],
        "ui": [stored[1]["id"]],
        "log": [stored[2]["id"]],
        "long": [stored[3]["id"]],
        "short": [],
    }
    data = {}
    for artifact in stored:
        response = server.api.download(task_id, artifact["id"])
        assert hashlib.sha256(response.content).hexdigest() == artifact["sha256"]
        assert len(response.content) == artifact["size"] == int(response.headers["content-length"])
        assert response.headers["etag"] == f'"{artifact["sha256"]}"'
        data[artifact["step"]] = response.content
    check_png(data["shot"])
    root = ElementTree.fromstring(data["ui"])
    assert root.tag == "hierarchy" and "Network & internet" in [n.get("text") for n in root.iter("node")]
    assert b"ActivityManager: Start proc" in data["log"]
    # The long output: whole in its artifact, its tail inline.
    assert data["long"].decode() == FULL_OUTPUT
    outputs = {step["id"]: step.get("output") for step in task["result"]["steps"]}
    assert outputs["long"] == TRUNCATED + FULL_OUTPUT[-INLINE_OUTPUT_CHARS:]
    assert outputs["short"] == "short\n"
    assert all(step.get("reason") is None for step in task["result"]["steps"])
    record = agent.record(task_id)
    assert [(u.step, u.tries, u.answer) for u in record.uploads] == [(s, 1, 201) for s in ("shot", "ui", "log", "long")]
    assert temporary_dirs(task_id) == [], "without --keep-artifacts nothing is left on the host's disk"


@req("AGENT-EVIDENCE/s4")
def test_with_keep_artifacts_the_files_stay_byte_for_byte_as_uploaded(server, sim, make_agent, tmp_path):
    kept = tmp_path / "kept"
    agent = make_agent(server.url, sim.server_port, keep_artifacts=kept)
    task_id = server.api.submit({"steps": [LAUNCH, SHOT, LONG]})["id"]

    assert server.api.wait_status(task_id)["status"] == "done"

    agent.record(task_id)
    files = {f.suffix: f for f in (kept / task_id / "1").iterdir()}
    assert sorted(files) == [".png", ".txt"]  # the screenshot and the long output
    uploaded = {a["step"]: server.api.download(task_id, a["id"]).content for a in server.api.artifacts(task_id)}
    assert files[".txt"].name == "long-output.txt" and files[".txt"].read_bytes() == uploaded["long"]
    assert files[".png"].read_bytes() == uploaded["shot"]
    assert temporary_dirs(task_id) == []


@req("AGENT-EVIDENCE/s3")
def test_evidence_the_server_refuses_is_in_the_steps_reason_and_the_plan_goes_on(make_server, sim, make_agent):
    server = make_server(max_artifact_bytes=1000)  # a simulated screenshot is bigger
    make_agent(server.url, sim.server_port)
    task_id = server.api.submit({"steps": [LAUNCH, SHOT, shell("after", "echo after")]})["id"]

    task = server.api.wait_status(task_id)

    assert task["status"] == "done", task  # the step did what it was asked; only its evidence is missing
    steps = {step["id"]: step for step in task["result"]["steps"]}
    assert steps["shot"]["status"] == "completed" and "artifacts" not in steps["shot"]
    reason = steps["shot"]["reason"]
    assert reason.startswith("screenshot not stored: 413 payload_too_large"), reason
    assert "1000" in reason and "--max-artifact-bytes" in reason
    assert steps["after"]["output"] == "after\n"
    assert server.api.artifacts(task_id) == []


@req("AGENT-EVIDENCE/s2")
def test_an_upload_whose_answer_is_lost_is_sent_again_and_stored_once(server, sim, make_agent, proxy_to):
    proxy = proxy_to(server.port)
    proxy.drop_response(b"/artifacts/shot-screenshot.png?step=shot ")  # after the server stored it
    agent = make_agent(proxy.url, sim.server_port)
    task_id = server.api.submit({"steps": [LAUNCH, SHOT]})["id"]

    task = server.api.wait_status(task_id)

    assert task["status"] == "done", task
    assert proxy.dropped == 1
    (stored,) = server.api.artifacts(task_id)
    record = agent.record(task_id)
    (upload,) = record.uploads
    assert (upload.name, upload.tries, upload.answer, upload.artifact_id) == (
        "shot-screenshot.png",
        2,
        200,
        stored["id"],
    )
    assert step_artifacts(task) == {"open": [], "shot": [stored["id"]]}
    events = [e for e in server.api.history(task_id) if e["type"] == "artifact_stored"]
    assert [e["data"]["id"] for e in events] == [stored["id"]]


@pytest.mark.parametrize(
    ("step_id", "name"),
    [
        ("open", "open-screenshot.png"),
        ("a..b", "a__b-"),
        ("x/y", "x_y-"),
        ("é" * 200, "_" * 80 + "-"),
    ],
)
def test_an_artifacts_name_is_fixed_by_its_step_and_within_the_servers_rule(step_id, name):
    made = artifact_name(step_id, "screenshot", ".png")
    assert made == artifact_name(step_id, "screenshot", ".png")  # a retry uses the same name
    assert made.startswith(name) and len(made) <= 128 and ".." not in made
    assert all(c.isascii() and (c.isalnum() or c in "._-") for c in made)
    assert artifact_name("a..c", "x", ".png") != artifact_name("a..b", "x", ".png")


def one_screenshot(server, directory: Path, backoff: tuple[float, float]) -> Attempt:
    """An attempt of a plan of one screenshot step, its files in `directory` (nothing runs on a device)."""
    plan = Plan(steps=(Step(id="shot", action="screenshot"),))
    assignment = ClaimedAttempt(
        task_id="t_1",
        attempt=1,
        lease_id="l_1",
        lease_expires_at=10_000,
        lease_ms=1000,
        device="d1",
        plan=plan,
        cancel_requested=False,
    )
    return Attempt(
        assignment=assignment,
        channel=server,
        clock=ServerClock(assignment.granted_at, time.monotonic()),
        executor=AdbExecutor(BoundedClient("127.0.0.1", 9), "d1", artifacts_dir=directory),
        pool=concurrent.futures.ThreadPoolExecutor(1),
        backoff=backoff,
    )


async def nothing_to_wait_for() -> None:
    """No acknowledgement is outstanding."""


class RefusingServer:
    """A control plane that answers every upload with a lease refusal."""

    def __init__(self) -> None:
        self.sent: list[str] = []

    async def upload(self, task_id, attempt, lease_id, step, name, path, content_type):
        self.sent.append(name)
        raise Rejected(409, "lease_expired", "the lease ran out")


def test_an_upload_refused_for_the_lease_is_lease_loss_and_nothing_more_is_sent(tmp_path):
    server = RefusingServer()
    attempt = one_screenshot(server, tmp_path, (0.01, 0.01))
    evidence = Evidence(attempt, settled=nothing_to_wait_for, keep=False)
    shot = tmp_path / "shot.png"
    shot.write_bytes(b"png")

    stored = asyncio.run(evidence.store(Step(id="shot", action="screenshot"), shot, "image/png", "x" * 20_000))

    assert attempt.execution.stop is StopReason.lease_lost and attempt.wake.is_set() and attempt.stop_signal.is_set()
    assert server.sent == ["shot-screenshot.png"]  # the long output was not sent: the lease is gone
    assert stored == Stored(
        (), "screenshot not stored: 409 lease_expired (the lease ran out); output not stored: the lease was lost"
    )
    assert list(tmp_path.iterdir()) == []  # the temporary files are removed all the same


def test_a_file_that_cannot_be_read_is_reported_not_retried(tmp_path):
    server = ControlPlane("http://127.0.0.1:9", "token", "h1")  # never reached: the file is read first
    evidence = Evidence(one_screenshot(server, tmp_path, (0, 0)), settled=nothing_to_wait_for, keep=False)

    stored = asyncio.run(evidence.store(Step(id="shot", action="screenshot"), tmp_path / "gone.png", "image/png"))

    assert stored.artifacts == () and stored.missing.startswith(
        "screenshot not stored: the local file could not be read"
    )
    assert [(u.tries, u.answer) for u in evidence.uploads] == [(1, None)]


@req("AGENT-EVIDENCE/s1")
def test_a_step_a_steer_inserted_stores_its_evidence_once_the_server_knows_the_step(server, sim, make_agent, proxy_to):
    """The server takes evidence of an inserted step only once it has the host's admission of
    the steer: the agent's uploads wait for its acknowledgements, however slow they are."""
    proxy = proxy_to(server.port)
    make_agent(proxy.url, sim.server_port, lease_seconds=1.0)
    # `a` lasts long enough to be seen running and steered on a loaded machine.
    task_id = server.api.submit({"steps": [shell("a", "sleep 3"), shell("b", "echo b")]})["id"]
    wait_running(sim, "amc-sim-01", "sleep 3")
    proxy.hold(b"/messages/")  # the admission reaches the server late
    message = server.api.post_message(task_id, "steer", data={"insert_after": "a", "steps": [SHOT]})
    eventually(lambda: proxy.held, 10, what="the admission held")
    eventually(  # meanwhile the inserted screenshot has run
        lambda: any("screencap" in r.command for r in device_log(sim, "amc-sim-01")), 20, what="the screenshot taken"
    )
    proxy.release()

    task = server.api.wait_status(task_id)

    assert task["status"] == "done", (task["result"], task["attempts"])
    assert server.api.message(task_id, message["id"])["state"] == "completed"
    (stored,) = server.api.artifacts(task_id)
    assert stored["step"] == "shot"
    assert step_artifacts(task) == {"a": [], "shot": [stored["id"]], "b": []}
