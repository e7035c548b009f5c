"""Durable store: commands/s through LMDB with group commit, beside raw LMDB, and start-up.

Measured in one run, on the same file system, so the ratios hold even on a noisy machine:

raw LMDB
    put-and-commit with fsync (sync=True, metasync=True, the store's settings) of 200-byte
    values: one put per commit (commits/s), and 100 puts per commit (puts/s).
durable commands/s
    `LmdbService.execute` from 1, 8 and 64 concurrent callers (coroutines on one event
    loop, as the HTTP server runs them). Each caller owns a host with one device and
    loops over a task lifecycle: submit, claim, start, renew, renew, report done; six
    commands, each acknowledged only after its batch was fsynced. Reported: commands/s,
    commits/s, the mean batch, the median and p99 latency of a command, and the ratios to
    the raw figures and to the same callers on a `MemoryService` (no thread, no disk: the
    CPU ceiling of this workload on this machine at that moment).
start-up
    a store with 100,000 unfinished tasks (queued, plus 1,000 assigned or dispatched on
    1,000 devices): seconds from `LmdbService.open` to the first command answered, and the
    bytes the store uses per task (log, records and indexes together). Twice: all tasks
    of one plan (a fan-out; start-up structures each distinct plan once), and every task
    with its own plan (the worst case).

Run: python bench/store.py [--repeat 5] [--seconds 3] [--startup-tasks 100000] [--dir DIR]
Every figure is the median of --repeat runs (start-up: of 3 opens).

    python bench/store.py --compare [--repeat 5] [--seconds 3] [--callers 64]

compares, in one process and alternating run by run, the store with every record and
event through a plain cattrs converter's generic hooks, and with the codec's hooks
generated from the record declarations (`amc.adapters.codec`): CPU per durable
command, commands/s, and start-up of the two backlogs (built once each, opened
alternately). The stored bytes are the same either way.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import statistics
import tempfile
import time
from pathlib import Path

import lmdb
import orjson

from amc.adapters import codec
from amc.adapters.lmdb import LmdbService, layout
from amc.core.commands import ClaimTask, RegisterHost, RenewLease, ReportResult, StartAttempt, SubmitTask
from amc.core.kernel import Assignment
from amc.core.lifecycle import TaskStatus
from amc.core.records import DeviceSpec, Host, Plan, Step, Task
from amc.service import MemoryService, Service, TaskQuery

PLAN = Plan(
    steps=(Step(id="open", action="launch", args={"package": "com.example"}), Step(id="shot", action="screenshot"))
)
VALUE = os.urandom(200)


# --- raw LMDB ------------------------------------------------------------------------------


def raw_lmdb(base: Path, commits: int, puts_per_commit: int) -> float:
    """Puts per second, `puts_per_commit` puts in each fsynced commit."""
    path = Path(tempfile.mkdtemp(dir=base, prefix="raw-"))
    env = lmdb.open(str(path), map_size=1 << 30, max_dbs=2, sync=True, metasync=True)
    db = env.open_db(b"raw")
    key = 0
    started = time.perf_counter()
    for _ in range(commits):
        with env.begin(write=True, db=db) as txn:
            for _ in range(puts_per_commit):
                key += 1
                txn.put(key.to_bytes(8, "big"), VALUE, append=True)
    seconds = time.perf_counter() - started
    env.close()
    shutil.rmtree(path)
    return commits * puts_per_commit / seconds


# --- durable commands ----------------------------------------------------------------------


async def lifecycle_loop(service: Service, caller: int, stop_at: float, latencies: list[float]) -> int:
    """One caller's loop of task lifecycles on `service` until `stop_at`; the commands it made."""
    host = f"h{caller}"
    await service.execute(RegisterHost(now=0, host_id=host, devices=(DeviceSpec(serial=f"s{caller}"),)))
    count, n = 0, 0
    clock = time.perf_counter

    async def run(command):
        nonlocal count
        started = clock()
        decision = await service.execute(command)
        latencies.append(clock() - started)
        count += 1
        return decision

    while clock() < stop_at:
        n += 1
        await run(SubmitTask(now=0, task_id=f"t{caller}-{n}", tenant=f"tenant{caller % 4}", plan=PLAN))
        a = (await run(ClaimTask(now=0, host_id=host, lease_id=f"L{caller}-{n}", lease_ms=30_000))).reply
        if not isinstance(a, Assignment):
            continue
        lease = dict(now=0, host_id=host, task_id=a.task_id, attempt=a.attempt, lease_id=a.lease_id)
        await run(StartAttempt(**lease))
        await run(RenewLease(**lease))
        await run(RenewLease(**lease))
        await run(ReportResult(**lease, status=TaskStatus.done))
    return count


def in_memory(callers: int, seconds: float) -> tuple[float, float]:
    """Commands/s and CPU µs per command of the same callers on a `MemoryService`."""
    service = MemoryService()

    async def main():
        started, cpu = time.perf_counter(), time.process_time()
        counts = await asyncio.gather(*(lifecycle_loop(service, c, started + seconds, []) for c in range(callers)))
        return sum(counts) / (time.perf_counter() - started), (time.process_time() - cpu) / sum(counts) * 1e6

    return asyncio.run(main())


def durable(base: Path, callers: int, seconds: float, measure_process: bool = False) -> dict:
    """One run of `callers` lifecycle loops on a new store. With `measure_process`, also
    the process CPU and the commands from opening the store to closing it (warm-up too)."""
    process_started = time.process_time()
    path = Path(tempfile.mkdtemp(dir=base, prefix=f"durable{callers}-"))
    batches: list[int] = []
    service = LmdbService.open(path, on_commit=lambda size, _: batches.append(size))
    latencies: list[float] = []
    try:

        async def main():
            # Warm up (file growth, first pages), then measure.
            warm = await asyncio.gather(
                *(lifecycle_loop(service, -c - 1, time.perf_counter() + 0.3, []) for c in range(callers))
            )
            batches.clear()
            started, cpu = time.perf_counter(), time.process_time()
            counts = await asyncio.gather(
                *(lifecycle_loop(service, c, started + seconds, latencies) for c in range(callers))
            )
            return sum(counts), time.perf_counter() - started, time.process_time() - cpu, sum(warm) + sum(counts)

        commands, elapsed, cpu, all_commands = asyncio.run(main())
    finally:
        service.close()
        shutil.rmtree(path)
    latencies.sort()
    extra = (
        {"process_cpu": time.process_time() - process_started, "all_commands": all_commands} if measure_process else {}
    )
    return {
        **extra,
        "rate": commands / elapsed,
        "cpu_us": cpu / commands * 1e6,
        "commits": len(batches) / elapsed,
        "batch": statistics.mean(batches) if batches else 0.0,
        "p50": latencies[len(latencies) // 2] * 1e3,
        "p99": latencies[int(len(latencies) * 0.99)] * 1e3,
    }


# --- where the CPU of a durable command goes ------------------------------------------------

STAGES = (
    ("kernel", "kernel.execute: decide and apply"),
    ("stamp_events", "stamping commands, encoding events"),
    ("records", "encoding changed records, diffing their index entries"),
    ("puts", "LMDB puts of the batch"),
    ("commit_cpu", "LMDB commit: writing pages, fsync (CPU)"),
    ("release", "handing replies back to the event loop"),
    ("writer_other", "the writer's queue and loop"),
    ("callers", "the callers' side: event loop, futures, commands"),
)


def breakdown(base: Path, callers: int, seconds: float) -> dict:
    """One durable run with the writer's stages timed by their thread's CPU clock.

    Each stage is wrapped once here (the wrappers cost about 1 µs per command, inside the
    figures); "callers" is the process CPU not spent on the writer thread. Also returns the
    fsync wait: the commit's wall time not spent on the CPU.
    """
    from amc.adapters import writer as writer_module
    from amc.adapters.lmdb.store import Store
    from amc.adapters.lmdb.writer import LmdbCommits, LmdbWrites
    from amc.core import kernel

    spent: dict[str, float] = dict.fromkeys([*(name for name, _ in STAGES), "commit_wall", "writer"], 0.0)
    thread_time = time.thread_time
    patched = {
        (kernel, "execute"): kernel.execute,
        (writer_module.Writer, "_decide"): writer_module.Writer._decide,
        (LmdbWrites, "records"): LmdbWrites.records,
        (LmdbCommits, "_write"): LmdbCommits._write,
        (writer_module.Writer, "_run"): writer_module.Writer._run,
        (writer_module, "release"): writer_module.release,
        (Store, "write"): Store.write,
    }

    def timed(name, function):
        def wrapper(*args):
            started = thread_time()
            try:
                return function(*args)
            finally:
                spent[name] += thread_time() - started

        return wrapper

    def commit(store, apply):
        started, wall = thread_time(), time.perf_counter()
        try:
            return patched[Store, "write"](store, apply)
        finally:
            spent["commit_cpu"] += thread_time() - started
            spent["commit_wall"] += time.perf_counter() - wall

    kernel.execute = timed("kernel", kernel.execute)
    writer_module.Writer._decide = timed("stamp_events", writer_module.Writer._decide)
    LmdbWrites.records = timed("records", LmdbWrites.records)
    LmdbCommits._write = timed("puts", LmdbCommits._write)
    writer_module.Writer._run = timed("writer", writer_module.Writer._run)
    writer_module.release = timed("release", writer_module.release)
    Store.write = commit
    try:
        result = durable(base, callers, seconds, measure_process=True)
    finally:
        for (owner, name), function in patched.items():
            setattr(owner, name, function)
    # Nested stages: report each one's own share.
    spent["commit_wall"] -= spent["commit_cpu"]
    spent["commit_cpu"] -= spent["puts"]
    spent["stamp_events"] -= spent["kernel"] + spent["records"]
    inside = ("kernel", "stamp_events", "records", "puts", "commit_cpu", "release")
    spent["writer_other"] = spent["writer"] - sum(spent[name] for name in inside)
    spent["callers"] = result["process_cpu"] - spent["writer"]
    commands = result["all_commands"]
    return {"result": result, "us": {name: spent[name] / commands * 1e6 for name in (*spent,)}}


# --- start-up -------------------------------------------------------------------------------


def plan_of(n: int, distinct: bool) -> Plan:
    if not distinct:
        return PLAN
    return Plan(
        steps=(
            Step(id="open", action="launch", args={"package": f"com.example.n{n}"}),
            Step(id="shot", action="screenshot"),
        )
    )


def build_backlog(path: Path, tasks: int, devices: int, distinct_plans: bool = False) -> None:
    """`tasks` unfinished tasks: `devices` of them leased (half dispatched), the rest queued."""

    async def main(service):
        hosts = devices // 10
        await asyncio.gather(
            *(
                service.execute(
                    RegisterHost(
                        now=0, host_id=f"h{h}", devices=tuple(DeviceSpec(serial=f"h{h}-d{d}") for d in range(10))
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
                            task_id=f"t{n}",
                            tenant=f"tenant{n % 4}",
                            plan=plan_of(n, distinct_plans),
                            priority=n % 3,
                        )
                    )
                    for n in range(start, min(tasks, start + 2_000))
                )
            )
        claims = await asyncio.gather(
            *(
                service.execute(ClaimTask(now=0, host_id=f"h{h}", lease_id=f"L{h}-{d}", lease_ms=3_600_000))
                for h in range(hosts)
                for d in range(10)
            )
        )
        await asyncio.gather(
            *(
                service.execute(
                    StartAttempt(
                        now=0, host_id=f"h{i // 10}", task_id=c.reply.task_id, attempt=1, lease_id=c.reply.lease_id
                    )
                )
                for i, c in enumerate(claims)
                if i % 2 == 0
            )
        )

    with LmdbService.open(path) as service:
        asyncio.run(main(service))


def startup(base: Path, tasks: int, opens: int, distinct_plans: bool) -> dict:
    path = Path(tempfile.mkdtemp(dir=base, prefix="startup-"))
    try:
        started = time.perf_counter()
        build_backlog(path, tasks, devices=1_000, distinct_plans=distinct_plans)
        built = time.perf_counter() - started
        times, cpus = [], []
        for _ in range(opens):
            started, cpu = time.perf_counter(), time.process_time()
            with LmdbService.open(path) as service:
                # Serving again: the first command is decided and committed.
                service.execute_sync(ClaimTask(now=0, host_id="h0", lease_id="probe", lease_ms=1_000))
                times.append(time.perf_counter() - started)
                cpus.append(time.process_time() - cpu)
                size = service.size_bytes()
                unfinished = len(service.tasks(TaskQuery(limit=1000, status=TaskStatus.queued)).tasks)
        assert unfinished == 1000
        return {
            "seconds": statistics.median(times),
            "cpu": statistics.median(cpus),
            "build": built,
            "bytes_per_task": size / tasks,
            "file_bytes_per_task": (path / "data.mdb").stat().st_size / tasks,
        }
    finally:
        shutil.rmtree(path)


# --- before / after: cattrs' generic hooks against the generated ones -----------------------


def _plain_converter_codec() -> tuple[dict, object, object]:
    """Encoders and decoders of the records through a plain cattrs converter (its generic
    generated hooks), as the store had them before the codec generated its own."""
    from cattrs.preconf.orjson import make_converter

    plain = make_converter(forbid_extra_keys=True)
    encoders = {}
    for cls, tag in codec._TAGS.items():
        hook = plain.get_unstructure_hook(cls)

        def encode(value, hook=hook, tag=tag):
            data = hook(value)
            data["type"] = tag
            return orjson.dumps(data)

        encoders[cls] = encode

    def decoder(tag, cls):
        hook = plain.get_structure_hook(cls)

        def decode(raw):
            data = orjson.loads(raw)
            if data.pop("type", None) != tag:
                raise ValueError(f"not a {tag}")
            return hook(data, cls)

        return decode

    return encoders, decoder("task", Task), decoder("host", Host)


_CODECS = {
    "generated": (dict(codec._ENCODERS), layout.decode_task, layout.decode_host),
}
_LOADER = layout.TaskLoader


def use_codec(name: str) -> None:
    """'cattrs': every record and event through a plain converter's hooks (as before);
    'generated': the codec as it is now."""
    if name not in _CODECS:
        _CODECS[name] = _plain_converter_codec()
    encoders, decode_task, decode_host = _CODECS[name]
    codec._ENCODERS.clear()
    codec._ENCODERS.update(encoders)  # `layout.encode` (events) looks them up there
    layout.encode_task = encoders[Task]  # the writer calls these directly
    layout.encode_host = encoders[Host]
    layout.decode_task, layout.decode_host = decode_task, decode_host
    # The start-up loader: the generated one shares equal plans; cattrs' decodes each task.
    layout.TaskLoader = _LOADER if name == "generated" else (lambda: decode_task)


def compare(args, base: Path) -> None:
    callers = [int(c) for c in args.callers.split(",")]
    modes = ("cattrs", "generated")
    runs: dict = {(m, c): [] for m in modes for c in callers}
    print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())} ({os.cpu_count()} CPUs)")
    for _ in range(args.repeat):
        for c in callers:
            for m in modes:
                use_codec(m)
                runs[m, c].append(durable(base, c, args.seconds))
    use_codec("generated")
    for c in callers if args.repeat else ():
        if c == callers[0]:
            print(
                f"{'callers':>7} {'codec':>10} {'commands/s':>11} {'CPU us/cmd':>11} {'batch':>6} {'p50 ms':>7}   (medians of {args.repeat})"
            )
        for m in modes:
            med = {k: statistics.median(r[k] for r in runs[m, c]) for k in runs[m, c][0]}
            print(
                f"{c:>7} {m:>10} {med['rate']:>11,.0f} {med['cpu_us']:>11.0f} {med['batch']:>6.1f} {med['p50']:>7.2f}"
            )
        ratio_cpu = statistics.median(
            a["cpu_us"] / b["cpu_us"] for a, b in zip(runs["generated", c], runs["cattrs", c])
        )
        ratio_rate = statistics.median(a["rate"] / b["rate"] for a, b in zip(runs["generated", c], runs["cattrs", c]))
        print(f"{c:>7} generated/cattrs, paired runs: CPU per command x{ratio_cpu:.2f}, commands/s x{ratio_rate:.2f}")
    if args.startup_tasks:
        for distinct in (False, True):
            path = Path(tempfile.mkdtemp(dir=base, prefix="startup-"))
            try:
                built = time.perf_counter()
                build_backlog(path, args.startup_tasks, devices=1_000, distinct_plans=distinct)
                built = time.perf_counter() - built
                times: dict = {m: [] for m in modes}
                for _ in range(3):
                    for m in modes:
                        use_codec(m)
                        started, cpu = time.perf_counter(), time.process_time()
                        with LmdbService.open(path) as service:
                            service.execute_sync(
                                ClaimTask(now=0, host_id="h0", lease_id=f"probe-{m}-{len(times[m])}", lease_ms=1_000)
                            )
                            times[m].append((time.perf_counter() - started, time.process_time() - cpu))
                use_codec("generated")
                plans = "every task its own plan" if distinct else "one plan for all"
                for m in modes:
                    wall = statistics.median(w for w, _ in times[m])
                    cpu = statistics.median(u for _, u in times[m])
                    print(
                        f"start-up, {args.startup_tasks:,} tasks ({plans}), {m:>9}: {wall:.2f} s wall, {cpu:.2f} s CPU (median of 3; built in {built:.0f} s)"
                    )
            finally:
                shutil.rmtree(path)
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


def print_breakdown(base: Path, callers: int, seconds: float, runs: int) -> None:
    found = [breakdown(base, callers, seconds) for _ in range(runs)]
    us = {name: statistics.median(f["us"][name] for f in found) for name in found[0]["us"]}
    total = sum(us[name] for name, _ in STAGES)
    print()
    print(f"where the CPU of a durable command goes, {callers} callers (medians of {runs} runs, µs per command):")
    for name, what in STAGES:
        print(f"  {us[name]:>7.1f}  {us[name] / total:>4.0%}  {what}")
    print(f"  {total:>7.1f}  100%  in all (the fsync wait, off the CPU: {us['commit_wall']:.1f} µs per command)")
    store_work = us["stamp_events"] + us["records"] + us["puts"] + us["commit_cpu"]
    rest = total - store_work
    print(
        f"  without the store's own work ({store_work:.1f} µs) a command would still cost {rest:.1f} µs of CPU "
        f"in one interpreter: at most {1e6 / rest:,.0f} commands/s"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--seconds", type=float, default=3.0, help="measured seconds per durable run")
    parser.add_argument("--callers", default="1,8,64")
    parser.add_argument("--raw-commits", type=int, default=1_000)
    parser.add_argument("--startup-tasks", type=int, default=100_000)
    parser.add_argument("--breakdown-runs", type=int, default=3, help="runs of the CPU breakdown (0: none)")
    parser.add_argument("--dir", type=Path, default=None, help="where to create the stores (default: a temp dir)")
    parser.add_argument("--compare", action="store_true", help="cattrs' generic hooks against the generated ones")
    args = parser.parse_args()
    base = Path(tempfile.mkdtemp(dir=args.dir, prefix="amc-bench-store-"))
    try:
        (compare if args.compare else run)(args, base)
    finally:
        shutil.rmtree(base, ignore_errors=True)


def run(args, base: Path) -> None:
    callers = [int(c) for c in args.callers.split(",")]
    raw_one, raw_hundred, durable_runs = [], [], {c: [] for c in callers}
    memory_runs: dict[int, list[tuple[float, float]]] = {c: [] for c in callers}
    print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())} ({os.cpu_count()} CPUs)")
    # Interleave the runs, so that a noisy minute hurts every figure alike.
    for _ in range(args.repeat):
        raw_one.append(raw_lmdb(base, args.raw_commits, 1))
        raw_hundred.append(raw_lmdb(base, max(1, args.raw_commits // 4), 100))
        for c in callers:
            durable_runs[c].append(durable(base, c, args.seconds))
            memory_runs[c].append(in_memory(c, min(args.seconds, 1.0)))
    one, hundred = statistics.median(raw_one), statistics.median(raw_hundred)
    print(f"raw LMDB, fsync per commit, 1 put per commit:    {one:>9,.0f} commits/s")
    print(f"raw LMDB, fsync per commit, 100 puts per commit: {hundred:>9,.0f} puts/s ({hundred / 100:,.0f} commits/s)")
    print()
    print(
        f"{'callers':>7} {'commands/s':>11} {'commits/s':>10} {'batch':>6} {'p50 ms':>7} {'p99 ms':>7} "
        f"{'/ raw 1-put commits':>20} {'/ raw 100-put puts':>19} {'CPU us/cmd':>11} "
        f"{'in memory/s':>12} {'its CPU us':>11}"
    )
    for c in callers:
        runs = durable_runs[c]
        median = {k: statistics.median(r[k] for r in runs) for k in runs[0]}
        memory = statistics.median(r for r, _ in memory_runs[c])
        memory_cpu = statistics.median(u for _, u in memory_runs[c])
        print(
            f"{c:>7} {median['rate']:>11,.0f} {median['commits']:>10,.0f} {median['batch']:>6.1f} "
            f"{median['p50']:>7.2f} {median['p99']:>7.2f} {median['rate'] / one:>20.2f} {median['rate'] / hundred:>19.2f} "
            f"{median['cpu_us']:>11.0f} {memory:>12,.0f} {memory_cpu:>11.0f}"
        )
    if args.breakdown_runs:
        print_breakdown(base, max(callers), args.seconds, args.breakdown_runs)
    if args.startup_tasks:
        print()
        for distinct in (False, True):
            s = startup(base, args.startup_tasks, opens=3, distinct_plans=distinct)
            plans = "every task its own plan" if distinct else "one plan for all"
            print(
                f"start-up with {args.startup_tasks:,} unfinished tasks ({plans}): {s['seconds']:.2f} s to the "
                f"first command ({s['cpu']:.2f} s of CPU; median of 3; building the store took {s['build']:.0f} s); "
                f"{s['bytes_per_task']:,.0f} bytes per task in use, {s['file_bytes_per_task']:,.0f} of data file"
            )
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
