"""The action round trip of an interactive session, through `amc mcp` and directly, minus the
action's own run time on the simulated phone.

    python bench/mcp.py [--sessions 1 4] [--actions 100] [--json]

One `amc up --sim-devices N` (server, Host Agent, simulated phones) in a temporary directory.
For each concurrency S, S sessions run at once, each with its own agent: an MCP client (the
SDK's) that starts its own `amc mcp` on stdio, as an AI agent's host does. Each agent sends
`--actions` taps (on an empty spot of the home screen, which changes nothing) one after the
other and times each tool call, from `call_tool` to its result. The same number of taps is then
sent directly over HTTP (`POST /v1/tasks/{id}/actions?wait_seconds=30`), the caller's side of
Part D without MCP.

From each round trip the bench subtracts the action's run time as the Host Agent reported it
(`ended_at - started_at` of the action resource, read back afterwards): what is left is the
control plane's and the transport's share (post, long-poll delivery, outcome report, answer),
plus, through amc mcp, the MCP framing and the tool's own work.

Then, in one session on the example app (`--observes` calls of each, 0 skips it), the whole
tool call as an agent waits for it: `observe` (scale 0.5 with marks: one screenshot action,
then the image read from its artifact), `tap` by a selector and `tap` at the same element's
centre (the title, which reacts to nothing, so the screen stays).
"""

from __future__ import annotations

import sys
from pathlib import Path

# Run as a script, this file's directory comes first on sys.path, and bench/http.py would
# then shadow the standard library's `http` package (which httpx imports).
if sys.path and Path(sys.path[0]).resolve() == Path(__file__).resolve().parent:
    sys.path.pop(0)

import argparse
import json
import os
import re
import signal
import statistics
import subprocess
import tempfile
import threading
import time

import anyio
import httpx
from mcp import Client, StdioServerParameters

from amc.core.times import from_rfc3339

TAP = {"x": 5, "y": 2390}  # bottom-left corner of the home screen: no row there, the tap changes nothing


class Up:
    """`amc up` with `devices` simulated phones, its URL and client token."""

    def __init__(self, directory: Path, devices: int):
        env = {key: value for key, value in os.environ.items() if not key.startswith("AMC_")}
        command = [sys.executable, "-m", "amc", "up", "--port", "0", "--devices", "sim", "--sim-devices", str(devices)]
        self.process = subprocess.Popen(
            command, cwd=directory, env=env, text=True, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL
        )
        banner = ""
        for line in self.process.stdout:
            banner += line
            if "Ctrl-C stops everything" in line:
                break
        else:
            raise SystemExit(f"amc up did not start:\n{banner}")
        threading.Thread(target=lambda: [None for _ in self.process.stdout], daemon=True).start()
        self.url = re.search(r"server\s+(http://\S+)", banner).group(1)
        tokens = json.loads((directory / ".amc" / "tokens.json").read_text())
        self.token = next(entry["token"] for entry in tokens if entry["role"] == "client")

    def stop(self) -> None:
        self.process.send_signal(signal.SIGINT)
        try:
            self.process.wait(40)
        except subprocess.TimeoutExpired:
            self.process.kill()


def run_time(action: dict) -> float:
    """Seconds, to the millisecond of the protocol's timestamps."""
    return (from_rfc3339(action["ended_at"]) - from_rfc3339(action["started_at"])) / 1000


async def through_mcp(up: Up, actions: int) -> tuple[str, list[tuple[str, float]]]:
    """One agent: a session, then `actions` taps; (session id, [(action id, round trip seconds)])."""
    command = StdioServerParameters(
        command=sys.executable, args=["-m", "amc", "mcp"], env={"AMC_URL": up.url, "AMC_TOKEN": up.token}
    )
    timed: list[tuple[str, float]] = []
    async with Client(command) as client:
        started = await client.call_tool("start_session", {"wait_seconds": 600})
        session = started.structured_content["session_id"]
        for _ in range(actions):
            began = time.perf_counter()
            result = await client.call_tool("tap", {"session_id": session, **TAP})
            took = time.perf_counter() - began
            text = result.content[0].text
            if result.is_error or ": completed" not in text:
                raise SystemExit(f"a tap did not complete: {text}")
            timed.append((re.search(r"\(id (tap-\w+)\)", text).group(1), took))
        await client.call_tool("end_session", {"session_id": session})
    return session, timed


def direct(up: Up, session: str, actions: int) -> list[tuple[str, float]]:
    """`actions` taps posted over HTTP to a running session, each waiting for its outcome."""
    timed = []
    with httpx.Client(base_url=up.url, headers={"Authorization": f"Bearer {up.token}"}, timeout=60) as http:
        for n in range(actions):
            step = {"id": f"direct-{n}", "action": "tap", "args": TAP}
            began = time.perf_counter()
            answer = http.post(f"/v1/tasks/{session}/actions", params={"wait_seconds": 30}, json=step)
            took = time.perf_counter() - began
            if answer.status_code != 201 or answer.json()["status"] != "completed":
                raise SystemExit(f"a direct tap did not complete: {answer.status_code} {answer.text}")
            timed.append((step["id"], took))
    return timed


def overheads(up: Up, timed: dict[str, list[tuple[str, float]]]) -> tuple[list[float], list[float]]:
    """Round trip minus run time, and the round trip, in milliseconds, for every action of every session."""
    found, trips = [], []
    with httpx.Client(base_url=up.url, headers={"Authorization": f"Bearer {up.token}"}, timeout=60) as http:
        for session, pairs in timed.items():
            actions = {a["id"]: a for a in http.get(f"/v1/tasks/{session}/actions").json()["actions"]}
            found += [(took - run_time(actions[action_id])) * 1000 for action_id, took in pairs]
            trips += [took * 1000 for _, took in pairs]
    return found, trips


def start_direct_session(up: Up) -> str:
    with httpx.Client(base_url=up.url, headers={"Authorization": f"Bearer {up.token}"}, timeout=60) as http:
        task = http.post("/v1/tasks", json={"session": {"idle_timeout_seconds": 600}}).json()
        deadline = time.monotonic() + 60
        while http.get(f"/v1/tasks/{task['id']}").json()["status"] == "queued":
            if time.monotonic() > deadline:
                raise SystemExit("no phone was assigned to the direct session")
            time.sleep(0.05)
    return task["id"]


def end_direct_session(up: Up, session: str) -> None:
    with httpx.Client(base_url=up.url, headers={"Authorization": f"Bearer {up.token}"}, timeout=60) as http:
        http.post(f"/v1/tasks/{session}/end", json={})


def percentiles(measured: tuple[list[float], list[float]]) -> dict[str, float]:
    values, trips = measured
    ordered = sorted(values)
    cut = statistics.quantiles(ordered, n=100, method="inclusive")
    return {
        "n": len(ordered),
        "p50": statistics.median(ordered),
        "p99": cut[98],
        "max": ordered[-1],
        "round_trip_p50": statistics.median(trips),
    }


def measure(concurrency: int, actions: int) -> dict[str, dict[str, float]]:
    with tempfile.TemporaryDirectory() as tmp:
        up = Up(Path(tmp), concurrency)
        try:

            async def agents() -> dict[str, list[tuple[str, float]]]:
                results: dict[str, list[tuple[str, float]]] = {}

                async def one() -> None:
                    session, timed = await through_mcp(up, actions)
                    results[session] = timed

                async with anyio.create_task_group() as group:
                    for _ in range(concurrency):
                        group.start_soon(one)
                return results

            via_mcp = overheads(up, anyio.run(agents))

            sessions = [start_direct_session(up) for _ in range(concurrency)]
            timed: dict[str, list[tuple[str, float]]] = {}
            threads = [
                threading.Thread(target=lambda s=s: timed.__setitem__(s, direct(up, s, actions))) for s in sessions
            ]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
            via_http = overheads(up, timed)
            for session in sessions:
                end_direct_session(up, session)
        finally:
            up.stop()
    return {"direct": percentiles(via_http), "amc mcp": percentiles(via_mcp)}


OBSERVED_CALLS = {
    "observe (scale 0.5, marks)": ("observe", {"scale": 0.5, "marks": True}),
    "tap by selector": ("tap", {"text": "Example"}),
    "tap by point": ("tap", {"x": 540, "y": 100}),
}


DIRECT_OBSERVE = "the same screenshot over HTTP, without MCP (post, then read the image)"


async def observe_directly(http: httpx.AsyncClient, session: str, action_id: str) -> None:
    """What observe does, as a caller of the HTTP API: the screenshot action, then its image."""
    step = {"id": action_id, "action": "screenshot", "args": {"scale": 0.5, "format": "png", "marks": True}}
    answer = await http.post(f"/v1/tasks/{session}/actions", params={"wait_seconds": 30}, json=step)
    action = answer.json()
    if answer.status_code != 201 or action["status"] != "completed":
        raise SystemExit(f"a direct screenshot did not complete: {answer.status_code} {answer.text}")
    await http.get(f"/v1/tasks/{session}/artifacts/{action['artifacts'][0]}")


def measure_observe(calls: int) -> dict[str, dict[str, float]]:
    """Each of OBSERVED_CALLS `calls` times through amc mcp, in one session on the example app: ms."""
    with tempfile.TemporaryDirectory() as tmp:
        up = Up(Path(tmp), 1)
        try:

            async def agent() -> dict[str, list[float]]:
                command = StdioServerParameters(
                    command=sys.executable, args=["-m", "amc", "mcp"], env={"AMC_URL": up.url, "AMC_TOKEN": up.token}
                )
                timed: dict[str, list[float]] = {name: [] for name in [*OBSERVED_CALLS, DIRECT_OBSERVE]}
                async with Client(command) as client:
                    started = await client.call_tool("start_session", {"wait_seconds": 600})
                    session = started.structured_content["session_id"]
                    await client.call_tool("launch_app", {"session_id": session, "package": "com.example.app"})
                    headers = {"Authorization": f"Bearer {up.token}"}
                    async with httpx.AsyncClient(base_url=up.url, headers=headers, timeout=60) as http:
                        for n in range(calls):
                            for name, (tool, arguments) in OBSERVED_CALLS.items():
                                began = time.perf_counter()
                                result = await client.call_tool(tool, {"session_id": session, **arguments})
                                timed[name].append((time.perf_counter() - began) * 1000)
                                if result.is_error:
                                    raise SystemExit(f"{name} failed: {result.content[0].text}")
                            began = time.perf_counter()
                            await observe_directly(http, session, f"direct-observe-{n}")
                            timed[DIRECT_OBSERVE].append((time.perf_counter() - began) * 1000)
                    await client.call_tool("end_session", {"session_id": session})
                return timed

            timed = anyio.run(agent)
        finally:
            up.stop()
    return {name: percentiles((values, values)) for name, values in timed.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sessions", type=int, nargs="+", default=[1, 4], help="concurrent sessions, one run each")
    parser.add_argument("--actions", type=int, default=100, help="taps per session and per path")
    parser.add_argument("--observes", type=int, default=40, help="observe and tap calls in the example app")
    parser.add_argument("--json", action="store_true")
    options = parser.parse_args()
    rows = {n: measure(n, options.actions) for n in options.sessions}
    observed = measure_observe(options.observes) if options.observes else {}
    if options.json:
        print(json.dumps({"sessions": rows, "observe": observed}, indent=2))
        return
    print("Action round trip minus the action's run time as the Host Agent reported it, ms; and the round trip's p50")
    print("| sessions | path | actions | p50 | p99 | max | round trip p50 |")
    print("|---:|---|---:|---:|---:|---:|---:|")
    for n, paths in rows.items():
        for path, f in paths.items():
            print(
                f"| {n} | {path} | {f['n']:.0f} | {f['p50']:.1f} | {f['p99']:.1f} | {f['max']:.1f} | {f['round_trip_p50']:.1f} |"
            )
    if observed:
        print()
        print("Whole tool calls through amc mcp in one session on the example app, ms")
        print("| call | n | p50 | p99 | max |")
        print("|---|---:|---:|---:|---:|")
        for name, f in observed.items():
            print(f"| {name} | {f['n']:.0f} | {f['p50']:.1f} | {f['p99']:.1f} | {f['max']:.1f} |")


if __name__ == "__main__":
    main()
