"""Recording overhead on step duration: the same steps with and without a screen recording
running beside them, on one simulated phone (1080x2400) through the executor.

    python bench/record.py [--rounds 4] [--steps 10] [--json]

Each round runs `--steps` of each step kind unrecorded, then `record` start, the same steps,
and `record` stop; the rounds alternate so that a change in the machine's load falls on both
sides. Step kinds: `keyevent` (one short shell call), `ui_tree` without settle (one supervised
dump), `screenshot` at scale 0.5 (a raw frame over `exec:screencap`, encoded on the host).
Reports each kind's median step duration, unrecorded and recorded, and their ratio; the
`record` start and stop steps' medians; and the mp4 bytes per recorded second.

On the simulator the recording's cost is the simulator's: it draws a frame 4 times a second
and encodes it with ffmpeg (a child process) on the same two cores the steps use. On a phone
`screenrecord` encodes in the hardware encoder, and the steps share only the device's CPU
with it; so these figures bound the overhead from above rather than predict a phone's.
"""

from __future__ import annotations

import sys
from pathlib import Path

if sys.path and Path(sys.path[0]).resolve() == Path(__file__).resolve().parent:
    sys.path.pop(0)  # bench/http.py would shadow the standard library's `http`

import argparse
import json
import statistics
import tempfile
import time
from typing import Any

from amc.adapters.adb.client import BoundedClient
from amc.adapters.adb.executor import AdbExecutor
from amc.sim import SimDeviceSpec, Simulator

SERIAL = "amc-sim-bench"
STEPS: dict[str, tuple[str, dict[str, Any]]] = {
    "keyevent": ("keyevent", {"key": "KEYCODE_DPAD_DOWN"}),
    "ui_tree": ("ui_tree", {"settle": False}),
    "screenshot 0.5": ("screenshot", {"scale": 0.5, "settle": False}),
}


def timed(executor: AdbExecutor, action: str, args: dict[str, Any]) -> tuple[float, Any]:
    started = time.perf_counter()
    result = executor.run(action, args, step_id="bench")
    return (time.perf_counter() - started) * 1000, result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--steps", type=int, default=10, help="of each kind, per round and side")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    plain: dict[str, list[float]] = {name: [] for name in STEPS}
    recorded: dict[str, list[float]] = {name: [] for name in STEPS}
    starts: list[float] = []
    stops: list[float] = []
    video_bytes, video_seconds = 0, 0.0
    with tempfile.TemporaryDirectory() as tmp, Simulator([SimDeviceSpec(serial=SERIAL)]) as sim:
        client = BoundedClient("127.0.0.1", sim.server_port, io_timeout=10.0)
        executor = AdbExecutor(client, SERIAL, artifacts_dir=Path(tmp))
        executor.run("launch", {"package": "com.example.app"})
        for action, step_args in STEPS.values():  # warm-up: caches, connections
            timed(executor, action, step_args)
        for _ in range(args.rounds):
            for name, (action, step_args) in STEPS.items():
                plain[name] += [timed(executor, action, step_args)[0] for _ in range(args.steps)]
            began = time.perf_counter()
            starts.append(timed(executor, "record", {"mode": "start"})[0])
            for name, (action, step_args) in STEPS.items():
                recorded[name] += [timed(executor, action, step_args)[0] for _ in range(args.steps)]
            elapsed, result = timed(executor, "record", {"mode": "stop"})
            stops.append(elapsed)
            video_seconds += time.perf_counter() - began
            video_bytes += sum(path.stat().st_size for path in (result.artifact, *result.more_artifacts))
    figures: dict[str, Any] = {
        name: {
            "plain_p50": statistics.median(plain[name]),
            "recorded_p50": statistics.median(recorded[name]),
            "ratio": statistics.median(recorded[name]) / statistics.median(plain[name]),
        }
        for name in STEPS
    }
    figures["record start p50"] = statistics.median(starts)
    figures["record stop p50"] = statistics.median(stops)
    figures["mp4 KiB per recorded second"] = video_bytes / 1024 / video_seconds
    if args.json:
        print(json.dumps(figures, indent=2))
        return
    print(f"{args.rounds} rounds x {args.steps} steps of each kind per side; ms, medians")
    for name in STEPS:
        figure = figures[name]
        print(
            f"  {name:<16} unrecorded {figure['plain_p50']:7.1f}  recorded {figure['recorded_p50']:7.1f}"
            f"  ratio {figure['ratio']:.2f}"
        )
    print(f"  record start {figures['record start p50']:.1f}, record stop {figures['record stop p50']:.1f}")
    print(f"  mp4: {figures['mp4 KiB per recorded second']:.1f} KiB per recorded second")


if __name__ == "__main__":
    main()
