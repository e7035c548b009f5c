"""The web console's load times in headless Chromium, against a real `amc serve` with a big store.

    python bench/console.py [--tasks 100000] [--hosts 100] [--devices 10] [--busy 300] [--repeat 5]

Builds an LMDB store in this process (hosts of `--devices` simulated devices each, with
model and attributes; `--tasks` tasks of one tenant labelled batch=0..99; `--busy` of them
claimed and started, one per device on the first hosts), then serves it with `amc serve` and:

- makes every host read online (one request with its token) and has each busy task report
  its current step (a renewal with progress), as Host Agents would;
- opens each page in headless Chromium (/usr/bin/chromium through Playwright), `--repeat`
  times, each in a new tab already signed in, and reads from the Performance API when the
  page first showed its data (the console's `amc:rendered` mark, in ms from the start of the
  navigation: the page's files, its API calls and the rendering together), and the longest
  API call of the page (`responseEnd - requestStart` of its /v1 resource timings);
- times the same API calls from Python (httpx, one at a time), without a browser.

Prints one line per page: the median and the worst of the runs. Targets (issue 16): the fleet
page with 1,000 devices on 100 hosts, and the first page of the task list with 100,000
tasks, each shown in < 1 s.
"""

from __future__ import annotations

import sys
from pathlib import Path

# Run as a script, this directory comes first on sys.path, and bench/http.py would then
# shadow the standard library's `http` package (which httpx imports).
if sys.path and Path(sys.path[0]).resolve() == Path(__file__).resolve().parent:
    sys.path.pop(0)

import argparse
import asyncio
import json
import secrets
import statistics
import tempfile
import time

import httpx

from amc.adapters.lmdb import LmdbService
from amc.cli.launch import LaunchError, Server
from amc.core.commands import ClaimTask, RegisterHost, StartAttempt, SubmitTask
from amc.core.records import DeviceSpec, Plan, Requirements, Step

PLAN = Plan(
    steps=(
        Step(id="open", action="launch", args={"package": "com.example"}),
        Step(id="look", action="screenshot"),
        Step(id="tree", action="ui_dump"),
    )
)
MODELS = ("Pixel 7", "SM-G991B", "Pixel 8", "moto g84")
CHROMIUM = "/usr/bin/chromium"
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking",
        "--disable-component-update", "--disable-sync"]  # fmt: skip


def build(data: Path, tasks: int, hosts: int, devices: int, busy: int) -> list[tuple[str, str, str]]:
    """The store; the busy attempts as (host, task id, lease id)."""

    async def main(service: LmdbService) -> list[tuple[str, str, str]]:
        await asyncio.gather(
            *(
                service.execute(
                    RegisterHost(
                        now=0,
                        host_id=f"h{h:03d}",
                        devices=tuple(
                            DeviceSpec(
                                serial=f"h{h:03d}-d{d:02d}",
                                attributes={
                                    "model": MODELS[d % len(MODELS)],
                                    "sdk": str(33 + d % 3),
                                    "rack": f"r{h % 7}",
                                },
                            )
                            for d in range(devices)
                        ),
                    )
                )
                for h in range(hosts)
            )
        )
        for start in range(0, tasks, 2_000):
            await asyncio.gather(
                *(
                    service.execute(
                        SubmitTask(
                            now=0,
                            task_id=f"t{n:06d}",
                            tenant="default",
                            plan=PLAN,
                            requirements=Requirements(serial=None, attributes={"model": MODELS[n % len(MODELS)]}),
                            labels={"batch": str(n % 100)},
                        )
                    )
                    for n in range(start, min(tasks, start + 2_000))
                )
            )
        leased = []
        for i in range(busy):
            host, device = f"h{i // devices:03d}", f"h{i // devices:03d}-d{i % devices:02d}"
            decision = await service.execute(
                ClaimTask(now=0, host_id=host, lease_id=f"L{i}", lease_ms=3_600_000, devices=(device,))
            )
            reply = decision.reply
            await service.execute(
                StartAttempt(now=0, host_id=host, task_id=reply.task_id, attempt=1, lease_id=reply.lease_id)
            )
            leased.append((host, reply.task_id, reply.lease_id))
        return leased

    with LmdbService.open(data) as service:
        return asyncio.run(main(service))


def serve(data: Path, tokens: Path) -> Server:
    try:
        return Server(data, "--host-timeout", "600", tokens=tokens)
    except LaunchError as error:
        raise SystemExit(error.report()) from None


def in_browser(browser, console: str, token: str, where: str, rows: str | None) -> dict:
    """One load of a page in a new tab: the rendered mark and the longest API call, in ms."""
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    context.add_init_script(f"sessionStorage.setItem('amc.token', {json.dumps(token)})")
    page = context.new_page()
    page.goto(console + where)
    page.wait_for_function("() => performance.getEntriesByName('amc:rendered').length > 0", timeout=60_000)
    figures = page.evaluate(
        """() => {
        const api = performance.getEntriesByType("resource").filter((e) => e.name.includes("/v1/"));
        return {
            rendered: performance.getEntriesByName("amc:rendered")[0].startTime,
            api: Math.max(0, ...api.map((e) => e.responseEnd - e.requestStart)),
            calls: api.length,
        };
    }"""
    )
    if rows is not None:
        figures["rows"] = page.locator(rows).count()
    context.close()
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", type=int, default=100_000)
    parser.add_argument("--hosts", type=int, default=100)
    parser.add_argument("--devices", type=int, default=10, help="devices per host")
    parser.add_argument("--busy", type=int, default=300, help="devices running a task")
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()

    from playwright.sync_api import sync_playwright

    work = Path(tempfile.mkdtemp(prefix="amc-bench-console-"))
    data = work / "store"
    began = time.monotonic()
    leased = build(data, args.tasks, args.hosts, args.devices, args.busy)
    print(f"built a store of {args.tasks:,} tasks, {args.hosts} hosts x {args.devices} devices, "
          f"{len(leased)} busy, in {time.monotonic() - began:.0f} s")  # fmt: skip
    tokens = {"client": secrets.token_urlsafe(24)}
    entries = [{"token": tokens["client"], "role": "client", "tenant": "default"}]
    for h in range(args.hosts):
        tokens[f"h{h:03d}"] = secrets.token_urlsafe(24)
        entries.append({"token": tokens[f"h{h:03d}"], "role": "host", "host_id": f"h{h:03d}"})
    (work / "tokens.json").write_text(json.dumps(entries))
    (work / "tokens.json").chmod(0o600)

    server = serve(data, work / "tokens.json")
    url = server.url
    try:
        with httpx.Client(base_url=url, timeout=60) as http:
            for h in range(args.hosts):  # a host's request shows it alive
                http.get(f"/v1/hosts/h{h:03d}", headers={"Authorization": f"Bearer {tokens[f'h{h:03d}']}"})
            for host, task_id, lease_id in leased:
                body = {"lease_id": lease_id, "progress": {"step": "look", "ended": 1}}
                http.post(
                    f"/v1/tasks/{task_id}/attempts/1/renew",
                    json=body,
                    headers={"Authorization": f"Bearer {tokens[host]}"},
                )
            client = {"Authorization": f"Bearer {tokens['client']}"}
            calls = {
                "GET /v1/hosts": "/v1/hosts",
                "GET /v1/tasks?status=dispatched&limit=1000": "/v1/tasks?status=dispatched&limit=1000",
                "GET /v1/tasks?order=newest&limit=50": "/v1/tasks?order=newest&limit=50",
                "GET /v1/tasks?order=newest&limit=50&status=queued": "/v1/tasks?order=newest&limit=50&status=queued",
                "GET /v1/tasks?order=newest&limit=50&label=batch=7": "/v1/tasks?order=newest&limit=50&label=batch%3D7",
                "GET /v1/tasks?order=newest&limit=50&label=none=x": "/v1/tasks?order=newest&limit=50&label=none%3Dx",
            }
            print("\nAPI calls from Python (ms: median / worst of --repeat):")
            for name, path in calls.items():
                times = []
                for _ in range(args.repeat):
                    started = time.perf_counter()
                    response = http.get(path, headers=client)
                    times.append((time.perf_counter() - started) * 1000)
                    assert response.status_code == 200, response.text
                size = len(response.content)
                print(f"  {name:<52} {statistics.median(times):7.1f} / {max(times):7.1f}   ({size:,} bytes)")

        pages = {
            "fleet": ("#/fleet", "tr[data-serial]"),
            "tasks, first page": ("#/tasks", "tr[data-task]"),
            "tasks, queued": ("#/tasks?status=queued", "tr[data-task]"),
            "tasks, label batch=7": ("#/tasks?label=batch%3D7", "tr[data-task]"),
            "task": (f"#/task/{leased[0][1] if leased else 't000000'}", None),
        }
        print("\nPages in headless Chromium (ms from navigation start; median / worst of --repeat):")
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=CHROMIUM, headless=True, args=ARGS)
            in_browser(browser, url + "/ui", tokens["client"], "#/fleet", None)  # warm the browser's disk cache
            for name, (where, rows) in pages.items():
                runs = [in_browser(browser, url + "/ui", tokens["client"], where, rows) for _ in range(args.repeat)]
                rendered = [r["rendered"] for r in runs]
                api = [r["api"] for r in runs]
                shown = f", {runs[0]['rows']:,} rows" if rows else ""
                print(
                    f"  {name:<22} shown at {statistics.median(rendered):7.1f} / {max(rendered):7.1f}"
                    f"   longest API call {statistics.median(api):6.1f} / {max(api):6.1f}   ({runs[0]['calls']} calls{shown})"
                )
            browser.close()
    finally:
        server.stop(30)


if __name__ == "__main__":
    main()
