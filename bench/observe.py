"""Observation and element-action timings on the simulator, through the real adb server.

    python bench/observe.py [--repeat 40] [--session-actions 40] [--json]

Part 1, the executor alone (`AdbExecutor` over ppadb, the simulator's adbd reached through a
Debian `adb` server of its own, as a phone would be):
- capture only: `exec:screencap` (raw frame) + decoding + encoding on the host, against
  `screencap -p` (the PNG made on the device, what ppadb's `screencap()` asks for);
- the `screenshot` action (dump, capture, dump; encode; marks), at scale 1 and 0.5, with and
  without marks, without and with settle;
- `ui_tree` with settle.

Part 2, in a session (`amc serve` in memory and `amc host run` on that same adb server, as
bench/sessions.py starts them): the round trip of a session action, post to answer, of
`tap` by coordinates, `tap` by selector (`{"text": ...}`), and `observe` (a screenshot at
scale 0.5 with marks, what `amc mcp`'s observe asks for).

Targets (issue 25): observe p50 under 150 ms; a selector tap under 50 ms above a coordinate
tap. On a phone the device side (uiautomator dump, screencap) costs far more than the
simulator's; these figures are what amc adds around it.
"""

from __future__ import annotations

import sys
from pathlib import Path

# Run as a script, this file's directory comes first on sys.path, and bench/http.py would
# then shadow the standard library's `http` package (which httpx imports).
if sys.path and Path(sys.path[0]).resolve() == Path(__file__).resolve().parent:
    sys.path.pop(0)

import argparse
import contextlib
import json
import os
import shutil
import socket
import statistics
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from typing import Any

import httpx

from amc.adapters.adb import frames
from amc.adapters.adb._ppadb import Device
from amc.adapters.adb.client import BoundedClient, run_service
from amc.adapters.adb.commands import RAW_SCREENCAP
from amc.adapters.adb.executor import AdbExecutor
from amc.adapters.adb.guard import Stopper
from amc.cli.launch import Agent
from amc.core.ui.marks import layout
from amc.core.ui.tree import parse_dump
from amc.sim import Simulator

sys.path.insert(0, str(Path(__file__).resolve().parent))
from cancel_latency import TOKENS, start_server, wait_until

APP = "com.example.app"
TITLE = "Example"  # the example app's main screen's title


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(p / 100 * len(ordered) + 0.5) - 1))]


def summary(samples: list[float]) -> dict[str, float]:
    ms = [s * 1000 for s in samples]
    return {"p50": statistics.median(ms), "p99": percentile(ms, 99), "n": len(ms)}


def timed(
    function: Callable[[], Any], repeat: int, warm: int = 3, clock: Callable[[], float] = time.perf_counter
) -> dict[str, float]:
    for _ in range(warm):
        function()
    samples = []
    for _ in range(repeat):
        started = clock()
        function()
        samples.append(clock() - started)
    return summary(samples)


@contextlib.contextmanager
def real_adb(home: Path) -> Iterator[tuple[str, int]]:
    """A Debian `adb` server of its own (port, HOME); yields (executable, port)."""
    executable = shutil.which("adb")
    if executable is None:
        raise SystemExit("this bench needs the Debian `adb` executable on PATH")
    port = free_port()
    env = {**os.environ, "HOME": str(home)}
    subprocess.run([executable, "-P", str(port), "start-server"], env=env, check=True, capture_output=True)
    try:
        yield executable, port
    finally:
        subprocess.run([executable, "-P", str(port), "kill-server"], env=env, capture_output=True)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def connect(executable: str, port: int, home: Path, device_port: int) -> str:
    serial = f"127.0.0.1:{device_port}"
    env = {**os.environ, "HOME": str(home)}
    subprocess.run([executable, "-P", str(port), "connect", serial], env=env, check=True, capture_output=True)
    wait_until(
        lambda: (
            f"{serial}\tdevice"
            in subprocess.run([executable, "-P", str(port), "devices"], env=env, capture_output=True, text=True).stdout
        ),
        10,
        f"{serial} online",
    )
    return serial


def executor_part(client: BoundedClient, serial: str, repeat: int, artifacts: Path) -> dict[str, dict[str, float]]:
    executor = AdbExecutor(client, serial, artifacts_dir=artifacts)
    executor.run("launch", {"package": APP})
    device = Device(client, serial)
    figures: dict[str, dict[str, float]] = {}

    def raw_capture(scale: float) -> None:
        stopper = Stopper()
        with stopper.active():
            data = run_service(device, RAW_SCREENCAP, stopper, max_bytes=frames.MAX_FRAME_BYTES).data
        frames.encode(frames.scaled(frames.decode_raw(data).image, scale), "png", 80)

    # The host's own work on one frame (no device, no transfer), wall and CPU: what a loaded
    # machine inflates, against what it costs.
    stopper = Stopper()
    with stopper.active():
        frame = run_service(device, RAW_SCREENCAP, stopper, max_bytes=frames.MAX_FRAME_BYTES).data
    screen = parse_dump(executor.run("ui_dump", {}).artifact.read_bytes())
    for scale, image_format in ((1.0, "png"), (0.5, "png"), (0.5, "jpeg")):

        def host_side(scale: float = scale, image_format: str = image_format) -> None:
            image = frames.scaled(frames.decode_raw(frame).image, scale)
            drawn = layout(
                screen.elements,
                width=image.width,
                height=image.height,
                scale=scale,
                char_width=frames.CHAR_WIDTH,
                line_height=frames.LINE_HEIGHT,
            )
            frames.draw_marks(image, drawn)
            frames.encode(image, image_format, 80)

        name = f"host only: decode, scale {scale:g}, marks, {image_format}"
        figures[name] = timed(host_side, repeat)
        figures[name + " (CPU)"] = timed(host_side, repeat, clock=time.process_time)
    figures["capture: screencap -p (PNG made on the device)"] = timed(device.screencap, repeat)

    def raw_transfer() -> None:
        stopper = Stopper()
        with stopper.active():
            run_service(device, RAW_SCREENCAP, stopper, max_bytes=frames.MAX_FRAME_BYTES)

    figures["capture: raw frame transfer only (10 MB)"] = timed(raw_transfer, repeat)
    figures["capture: raw + host PNG, scale 1"] = timed(lambda: raw_capture(1.0), repeat)
    figures["capture: raw + host PNG, scale 0.5"] = timed(lambda: raw_capture(0.5), repeat)
    for settle in (False, True):
        for scale in (1.0, 0.5):
            for marks in (False, True):
                args = {"scale": scale, "marks": marks, "settle": settle}
                name = f"screenshot scale {scale:g}{', marks' if marks else ''}{', settle' if settle else ''}"
                figures[name] = timed(lambda args=args: executor.run("screenshot", args), repeat)
    figures["screenshot scale 0.5, marks, jpeg q80, settle"] = timed(
        lambda: executor.run("screenshot", {"scale": 0.5, "marks": True, "format": "jpeg"}), repeat
    )
    figures["ui_tree, settle"] = timed(lambda: executor.run("ui_tree", {}), repeat)
    figures["ui_tree, no settle"] = timed(lambda: executor.run("ui_tree", {"settle": False}), repeat)
    for path in artifacts.iterdir():
        path.unlink()
    return figures


def session_part(url: str, serial: str, actions: int) -> dict[str, dict[str, float]]:
    headers = {"Authorization": f"Bearer {TOKENS['client']}"}
    samples: dict[str, list[float]] = {
        "tap by coordinates": [],
        "tap by selector": [],
        "observe (screenshot scale 0.5, marks, png)": [],
        "observe, as jpeg": [],
    }
    with httpx.Client(base_url=url, headers=headers, timeout=60) as api:
        body = {"session": {"idle_timeout_seconds": 600}, "requirements": {"serial": serial}}
        task_id = api.post("/v1/tasks", json=body).json()["id"]
        wait_until(lambda: api.get(f"/v1/tasks/{task_id}").json()["status"] == "dispatched", 60, "dispatched")
        counter = iter(range(1_000_000))

        def act(action: str, args: dict[str, Any]) -> float:
            posted = {"id": f"a{next(counter)}", "action": action, "args": args}
            sent = time.perf_counter()
            answer = api.post(f"/v1/tasks/{task_id}/actions", json=posted, params={"wait_seconds": "30"})
            took = time.perf_counter() - sent
            done = answer.json()
            assert answer.status_code == 201 and done["status"] == "completed", answer.text
            return took

        act("launch", {"package": APP})
        for n in range(actions + 3):  # the first three warm up
            # Both taps land on the title, which does nothing: the screen stays the same.
            by_point = act("tap", {"x": 540, "y": 50})
            by_selector = act("tap", {"target": {"text": TITLE}})
            observe = act("screenshot", {"scale": 0.5, "marks": True})
            observe_jpeg = act("screenshot", {"scale": 0.5, "marks": True, "format": "jpeg"})
            if n >= 3:
                samples["tap by coordinates"].append(by_point)
                samples["tap by selector"].append(by_selector)
                samples["observe (screenshot scale 0.5, marks, png)"].append(observe)
                samples["observe, as jpeg"].append(observe_jpeg)
        api.post(f"/v1/tasks/{task_id}/end")
    return {name: summary(values) for name, values in samples.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=40, help="timed runs of each executor measurement")
    parser.add_argument("--session-actions", type=int, default=40, help="of each kind, in the session")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    results: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as tmp, Simulator(1) as sim:
        home = Path(tmp) / "adb-home"
        home.mkdir()
        with real_adb(home) as (executable, adb_port):
            serial = connect(executable, adb_port, home, next(iter(sim.device_ports.values())))
            client = BoundedClient("127.0.0.1", adb_port, io_timeout=10.0)
            artifacts = Path(tmp) / "artifacts"
            artifacts.mkdir()
            results["executor"] = executor_part(client, serial, args.repeat, artifacts)
            server = start_server(Path(tmp))
            agent = Agent(server.url, "h1", TOKENS["host"], adb_port=adb_port, lease_seconds=30, log_level="warning")
            try:
                admin = httpx.Client(base_url=server.url, headers={"Authorization": f"Bearer {TOKENS['admin']}"})
                wait_until(
                    lambda: (admin.get("/v1/hosts/h1").json() or {}).get("devices"), 60, "the agent's registration"
                )
                results["session"] = session_part(server.url, serial, args.session_actions)
            finally:
                agent.stop(60)
                server.stop(30)
    print("executor alone, through the real adb server, ms: p50 / p99")
    for name, figure in results["executor"].items():
        print(f"  {name:<52} {figure['p50']:7.1f} / {figure['p99']:7.1f}")
    print("in a session, post to answer, ms: p50 / p99")
    for name, figure in results["session"].items():
        print(f"  {name:<52} {figure['p50']:7.1f} / {figure['p99']:7.1f}")
    session = results["session"]
    extra = session["tap by selector"]["p50"] - session["tap by coordinates"]["p50"]
    print(f"selector tap over coordinate tap (p50): {extra:+.1f} ms (target < 50)")
    observe = session["observe (screenshot scale 0.5, marks, png)"]["p50"]
    print(f"observe p50: {observe:.1f} ms, as jpeg {session['observe, as jpeg']['p50']:.1f} ms (target < 150)")
    print(f"load average after the run: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    if args.json:
        print(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
