"""What a simulated screen frame costs: drawing, PNG encoding, the raw copy, and a whole
`exec:screencap` over the simulated server.

    python bench/sim_frames.py [--runs 30] [--json]

For each size (1080x1920 and 1080x2400), each run draws a screen never drawn before
(the example app's main page with another typed name, so the frame caches miss), then:
- draw: laying the page out and drawing it with Pillow (`drawing._image`);
- png: encoding that frame as PNG (`screencap -p`, first time for a screen);
- raw: the header and the RGBA bytes (`screencap`, first time for a screen);
- cached png / cached raw: the same screen again (what a screen that does not change costs);
- exec: a raw frame over `exec:screencap` through the simulated server's socket, end to end.
Reports wall-clock medians and 90th percentiles, and the median CPU time of the calling
thread (for `exec`, the client's thread only: the simulator works in its own threads), in
milliseconds. On a shared machine the CPU figures are the steadier ones.
"""

from __future__ import annotations

import sys
from pathlib import Path

# Run as a script, this file's directory comes first on sys.path, and bench/http.py would
# then shadow the standard library's `http` package (which xml.sax's urllib imports).
if sys.path and Path(sys.path[0]).resolve() == Path(__file__).resolve().parent:
    sys.path.pop(0)

import argparse
import json
import socket
import statistics
import time
from collections.abc import Callable

from amc.sim import SimDeviceSpec, Simulator, drawing
from amc.sim.pages import USERNAME, ScreenState
from amc.sim.screens import Screen, screen_of

MAIN = "com.example.app/.MainActivity"


def _screen(spec: SimDeviceSpec, run: int) -> Screen:
    return screen_of(spec, ScreenState(component=MAIN, fields={USERNAME: f"user {run}"}, focused=USERNAME))


def _ms(action: Callable[..., object], *args: object) -> tuple[float, float]:
    """Wall-clock and this thread's CPU milliseconds of one call (CPU time holds on a busy machine)."""
    start, cpu = time.perf_counter(), time.thread_time()
    action(*args)
    return (time.perf_counter() - start) * 1000, (time.thread_time() - cpu) * 1000


def _exec(port: int, serial: str) -> bytes:
    with socket.create_connection(("127.0.0.1", port)) as sock:
        for request in (f"host:transport:{serial}", "exec:screencap"):
            sock.sendall(b"%04x" % len(request) + request.encode())
            assert sock.recv(4) == b"OKAY"
        data = bytearray()
        while chunk := sock.recv(1 << 20):
            data += chunk
    return bytes(data)


def measure(width: int, height: int, runs: int) -> dict[str, dict[str, float]]:
    spec = SimDeviceSpec(serial="bench", width=width, height=height)
    times: dict[str, list[tuple[float, float]]] = {
        name: [] for name in ("draw", "png", "raw", "cached png", "cached raw", "exec")
    }
    for run in range(runs):
        screen = _screen(spec, run)
        times["draw"].append(_ms(drawing._image, screen.root, screen.width, screen.height))
        times["png"].append(_ms(drawing.png, screen))
        times["raw"].append(_ms(drawing.raw, screen, spec.sdk))
        again = _screen(spec, run)
        times["cached png"].append(_ms(drawing.png, again))
        times["cached raw"].append(_ms(drawing.raw, again, spec.sdk))
    with Simulator([spec], adbd=False) as sim:
        device = sim.device("bench")
        device.open_activity(MAIN)
        for run in range(runs):
            device.app_fields(MAIN)[USERNAME] = f"exec {run}"  # a new screen each time
            times["exec"].append(_ms(_exec, sim.server_port, "bench"))
    return {
        name: {
            "p50": statistics.median(wall for wall, _ in values),
            "p90": statistics.quantiles([wall for wall, _ in values], n=10)[-1],
            "cpu p50": statistics.median(cpu for _, cpu in values),
        }
        for name, values in times.items()
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    results = {f"{w}x{h}": measure(w, h, args.runs) for w, h in ((1080, 1920), (1080, 2400))}
    if args.json:
        print(json.dumps(results, indent=2))
        return
    for size, figures in results.items():
        print(size)
        for name, figure in figures.items():
            print(
                f"  {name:<11} p50 {figure['p50']:7.2f} ms   p90 {figure['p90']:7.2f} ms"
                f"   cpu p50 {figure['cpu p50']:7.2f} ms"
            )


if __name__ == "__main__":
    main()
