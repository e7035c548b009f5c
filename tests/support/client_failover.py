"""The leader SIGKILLed while clients hold long reads open on it (specs/protocol.md "Clients
never hang", BOUNDED/s3), for `make test` (a few kill offsets) and `make watch-failover`
(bench/watch_failover.py: ten runs at each offset).

One run: two `amc serve --store postgresql://...` on a new database, the first leading. Open
against it, through amc's own clients given both URLs:

- `amc task watch` (a real process) on a task that waits for a device nobody has;
- a claim long poll (`amc.agent.client.ControlPlane.claim`, 20 s wait) for an idle device,
  retried as the Host Agent's slot does (a pause, then the servers' health: `find_leader`);
- a session's action wait (`ControlPlane.poll_action`, 20 s wait) on an attempt the host holds;
- a reader of the event stream (`amc.cli.events.LiveEvents`, what `amc task watch` and, in
  JavaScript, the console's live pages do).

`offset` seconds after the watch started, the leader is SIGKILLed. As soon as the standby
leads, each client is given a reason to hear from it: the watched task is cancelled, a task
for the idle device is submitted, an action is posted to the session. The figures are the
seconds from the kill until each client had what it waited for, beside the time the standby
took to lead.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import attrs
import httpx

from amc.agent.client import ControlPlane, Rejected, Uncertain
from amc.agent.slot import RETRY_SECONDS
from amc.cli.events import KEEPALIVE_SECONDS, SILENCE_FACTOR, LiveEvents, ServerEvent
from tests.support.failover import Follower, Server, health, write_tokens
from tests.support.plans import PLAN

AMC = str(Path(sys.executable).with_name("amc"))
WAIT_SECONDS = 20.0  # the long polls' wait: far longer than a failover
LEASE_SECONDS = 120.0  # the session's lease outlives the run
# What "within the keep-alive bound plus the failover time" allows beyond the takeover: the
# stream's silence bound, then one request timeout (a read cut mid-way is retried once).
SLACK_SECONDS = SILENCE_FACTOR * KEEPALIVE_SECONDS + 10.0


@attrs.define
class Run:
    offset: float  # seconds from the watch's start to the kill
    takeover: float  # kill -> the standby's health 200
    watch: float | None = None  # kill -> `amc task watch` ended, having reported the end
    claim: float | None = None  # kill -> the claim long poll got the task submitted after the takeover
    session: float | None = None  # kill -> the session's poll got the action posted after the takeover
    stream: float | None = None  # kill -> the stream reader had a stream open on the new leader
    watch_exit: int | None = None
    watch_output: str = ""
    leader_lines: list[str] = attrs.Factory(list)  # what the standby said about its role
    standby_metric: str = ""  # the standby's amc_leader line before the kill
    leader_metric: str = ""  # the leader's amc_leader line before the kill
    agent_log: list[str] = attrs.Factory(list)  # what ControlPlane logged

    def figures(self) -> dict[str, float | None]:
        return {"watch": self.watch, "claim": self.claim, "session": self.session, "stream": self.stream}

    def hung(self) -> list[str]:
        """The clients that did not reach the new leader within the bound."""
        bound = self.takeover + SLACK_SECONDS
        return [name for name, took in self.figures().items() if took is None or took > bound]


class _Records(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(f"{record.levelname} {record.getMessage()}")


def metric_line(url: str) -> str:
    text = httpx.get(url + "/metrics", timeout=5).text
    return next((line for line in text.splitlines() if line.startswith("amc_leader ")), "")


def run_once(pg_url: str, scratch: Path, offset: float) -> Run:
    """One kill of the leader `offset` seconds after `amc task watch` started (see above)."""
    scratch.mkdir(parents=True, exist_ok=True)
    tokens = write_tokens(scratch / "tokens.json", ["h1"])
    leader = Server(pg_url, scratch / "a", scratch / "tokens.json")
    deadline = time.monotonic() + 20
    while health(leader.url)[0] != 200:
        assert time.monotonic() < deadline, "the first server did not lead"
        time.sleep(0.05)
    standby = Server(pg_url, scratch / "b", scratch / "tokens.json")
    urls = f"{leader.url},{standby.url}"
    client = Follower([leader.url, standby.url], tokens["client"], patience=30)
    host = Follower([leader.url, standby.url], tokens["h1"], patience=30)
    records = _Records()
    agent_log = logging.getLogger("amc.agent")
    agent_log.addHandler(records)
    reader: LiveEvents | None = None
    watch: subprocess.Popen[str] | None = None
    loop_thread: threading.Thread | None = None
    stop = threading.Event()
    got: dict[str, float] = {}
    try:
        host.request("PUT", "/v1/hosts/h1", {"devices": [{"serial": "d-claim"}, {"serial": "d-session"}]})
        watched = client.request("POST", "/v1/tasks", {"plan": PLAN, "requirements": {"serial": "nowhere"}}).json()
        session = client.request("POST", "/v1/tasks", {"session": {}, "requirements": {"serial": "d-session"}}).json()
        standby_metric, leader_metric = metric_line(standby.url), metric_line(leader.url)

        async def clients(ready: threading.Event) -> None:
            plane = ControlPlane(urls, tokens["h1"], "h1")
            claims, polls = plane.channel(), plane.channel()
            assignment = await polls.claim("d-session", 0, LEASE_SECONDS)
            assert assignment is not None and assignment["task_id"] == session["id"], assignment
            lease_id, attempt = assignment["lease_id"], assignment["attempt"]
            await polls.lease("start", session["id"], attempt, lease_id, deadline=10)
            ready.set()

            async def claim() -> None:
                while not stop.is_set():
                    try:
                        if await claims.claim("d-claim", WAIT_SECONDS, LEASE_SECONDS) is not None:
                            got["claim"] = time.monotonic()
                            return
                    except (Uncertain, Rejected):
                        await asyncio.sleep(RETRY_SECONDS)  # as the Host Agent's slot does
                        await claims.find_leader()

            async def poll() -> None:
                while not stop.is_set():
                    try:
                        answer = await polls.poll_action(session["id"], attempt, lease_id, WAIT_SECONDS)
                    except Uncertain:
                        await asyncio.sleep(0.25)  # the session's own pause (amc.agent.session)
                        continue
                    if answer.get("action") is not None:
                        got["session"] = time.monotonic()
                        return

            try:
                await asyncio.wait_for(asyncio.gather(claim(), poll()), 120)
            finally:
                await claims.aclose()
                await polls.aclose()
                await plane.aclose()

        ready = threading.Event()
        loop_thread = threading.Thread(target=lambda: asyncio.run(clients(ready)), daemon=True)
        loop_thread.start()
        assert ready.wait(20), "the session's attempt did not start"

        def heard(event: ServerEvent) -> None:
            pass

        reader = LiveEvents([leader.url, standby.url], tokens["client"], heard).start()
        environment = {**os.environ, "AMC_URL": urls, "AMC_TOKEN": tokens["client"]}
        started = time.monotonic()
        watch = subprocess.Popen(
            [AMC, "task", "watch", watched["id"], "--give-up-after", "60", "--interval", "0.5"],
            env=environment,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        time.sleep(max(0.0, started + offset - time.monotonic()))
        killed = time.monotonic()
        leader.signal(signal.SIGKILL)
        leader.process.wait()
        while health(standby.url)[0] != 200:
            assert time.monotonic() - killed < 30, "the standby did not take over within 30 s"
            time.sleep(0.02)
        run = Run(offset, time.monotonic() - killed, standby_metric=standby_metric, leader_metric=leader_metric)
        # Something for each client to hear from the new leader.
        client.urls[:] = [standby.url]
        client.current = 0
        client.request("POST", f"/v1/tasks/{watched['id']}/cancel", {"reason": "failover test"})
        client.request("POST", "/v1/tasks", {"plan": PLAN, "requirements": {"serial": "d-claim"}})
        client.request(
            "POST", f"/v1/tasks/{session['id']}/actions", {"id": "a1", "action": "tap", "args": {"x": 1, "y": 1}}
        )
        bound = killed + run.takeover + SLACK_SECONDS + 5
        while time.monotonic() < bound:
            if run.stream is None and reader.open and reader.endpoints.current == standby.url:
                run.stream = time.monotonic() - killed
            if run.watch is None and watch.poll() is not None:
                run.watch = time.monotonic() - killed
            if run.stream is not None and run.watch is not None and {"claim", "session"} <= got.keys():
                break
            time.sleep(0.02)
        run.claim = got["claim"] - killed if "claim" in got else None
        run.session = got["session"] - killed if "session" in got else None
        if watch.poll() is None:
            watch.kill()
        run.watch_output = watch.communicate(timeout=10)[0]
        run.watch_exit = watch.returncode
        run.leader_lines = [line.strip() for line in standby.output if "leading" in line or "standing by" in line]
        run.agent_log = list(records.lines)
        return run
    finally:
        stop.set()
        if watch is not None and watch.poll() is None:
            watch.kill()
            watch.wait()
        if reader is not None:
            reader.close()
        if loop_thread is not None:
            loop_thread.join(30)
        agent_log.removeHandler(records)
        client.close()
        host.close()
        for server in (leader, standby):
            if server.process.poll() is None:
                server.stop()


def summary(runs: list[Run]) -> dict[str, Any]:
    """Per client: the median and the largest seconds from kill to reaching the new leader."""
    import statistics

    table: dict[str, Any] = {}
    for name in ("takeover", "watch", "claim", "session", "stream"):
        values = [getattr(run, name) for run in runs]
        seen = [value for value in values if value is not None]
        table[name] = {
            "median": statistics.median(seen) if seen else None,
            "max": max(seen) if seen else None,
            "missing": len(values) - len(seen),
        }
    return table
