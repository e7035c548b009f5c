"""Kernel throughput: commands/s for a realistic mixed workload, in process, one core.

For each size N (1,000 / 100,000 / 1,000,000 tasks by default) a fresh kernel gets N
submitted tasks, then works them off on 1,000 devices (100 hosts x 10) in waves: every
free device claims, the host starts, renews three times as the clock moves on, and
reports done. Along the way 5% of the tasks are cancelled while running (the next renewal
carries the cancellation and the host reports cancelled), 1% are cancelled while still
queued, and 2% of the attempts go silent so their leases expire and the tasks are
requeued. Every command goes through `kernel.execute`, expiry check included.

Run: python bench/kernel.py [--sizes 1000,100000,1000000] [--repeat 3]
Prints, for each size, the median of --repeat runs: commands per wall-clock second and per
CPU-second of this process (the latter is what other load on a shared machine disturbs
least), and the ratio of the largest size's rate to the smallest's.
"""

from __future__ import annotations

import argparse
import gc
import resource
import statistics
import time

from amc.core import kernel
from amc.core.commands import (
    CancelTask,
    ClaimTask,
    ExpireLeases,
    RegisterHost,
    RenewLease,
    ReportResult,
    StartAttempt,
    SubmitTask,
)
from amc.core.lifecycle import TERMINAL_STATUSES, TaskStatus
from amc.core.records import DeviceSpec, Plan, Requirements, Step
from amc.core.state import State

HOSTS, DEVICES_PER_HOST = 100, 10
LEASE_MS = 30_000
PLAN = Plan(
    steps=(Step(id="open", action="launch", args={"package": "com.example"}), Step(id="shot", action="screenshot"))
)
MODELS = ("Pixel 7", "Pixel 8")


def workload(size: int) -> tuple[int, float, float]:
    """Run the workload for `size` tasks; return (commands, wall seconds, CPU seconds)."""
    state, now, count = State(), 1_764_460_800_000, 0
    execute = kernel.execute

    def run(command):
        nonlocal count
        count += 1
        return execute(state, command)

    gc.collect()
    gc.disable()  # the records are immutable and acyclic; the collector only adds noise
    started, cpu_started = time.perf_counter(), time.process_time()
    for h in range(HOSTS):
        devices = tuple(
            DeviceSpec(serial=f"h{h}-d{d}", attributes={"model": MODELS[d % 2]}) for d in range(DEVICES_PER_HOST)
        )
        run(RegisterHost(now=now, host_id=f"h{h}", devices=devices))
    for n in range(size):
        requirements = Requirements(attributes={"model": MODELS[n % 2]}) if n % 3 == 0 else Requirements()
        run(
            SubmitTask(
                now=now,
                task_id=f"t{n}",
                tenant=f"tenant{n % 4}",
                plan=PLAN,
                requirements=requirements,
                priority=n % 3,
                max_attempts=3,
            )
        )
        if n % 100 == 50:  # 1% cancelled while queued
            run(CancelTask(now=now, task_id=f"t{n}", tenant=f"tenant{n % 4}"))
    leases = 0
    while True:
        now += 1_000
        wave = []
        for h in range(HOSTS):
            for _ in range(DEVICES_PER_HOST):
                reply = run(ClaimTask(now=now, host_id=f"h{h}", lease_id=f"L{leases}", lease_ms=LEASE_MS)).reply
                leases += 1
                if not isinstance(reply, kernel.Assignment):
                    break
                wave.append((f"h{h}", reply))
        if not wave:
            break
        for host, a in wave:
            run(StartAttempt(now=now, host_id=host, task_id=a.task_id, attempt=a.attempt, lease_id=a.lease_id))
        silent = {a.task_id for i, (_, a) in enumerate(wave) if i % 50 == 7}  # 2% go silent
        for i, (_host, a) in enumerate(wave):
            if i % 20 == 3:  # 5% are cancelled while running
                run(CancelTask(now=now, task_id=a.task_id, tenant=None))
        cancelled = set()
        for _ in range(3):
            now += LEASE_MS // 3
            for host, a in wave:
                if a.task_id in silent:
                    continue
                reply = run(
                    RenewLease(now=now, host_id=host, task_id=a.task_id, attempt=a.attempt, lease_id=a.lease_id)
                ).reply
                if reply is not None and reply.cancel_requested:
                    cancelled.add(a.task_id)
        for host, a in wave:
            if a.task_id in silent:
                continue
            status = TaskStatus.cancelled if a.task_id in cancelled else TaskStatus.done
            run(
                ReportResult(
                    now=now, host_id=host, task_id=a.task_id, attempt=a.attempt, lease_id=a.lease_id, status=status
                )
            )
        now += LEASE_MS
        run(ExpireLeases(now=now))  # the silent ones expire and are requeued
    seconds, cpu = time.perf_counter() - started, time.process_time() - cpu_started
    gc.enable()
    unfinished = sum(t.status not in TERMINAL_STATUSES for t in state.tasks.values())
    assert unfinished == 0, f"{unfinished} tasks did not finish"
    return count, seconds, cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1000,100000,1000000")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    rates = {}
    print(
        f"{'tasks':>10} {'commands':>12} {'wall s':>8} {'commands/s':>11} {'CPU s':>8} {'per CPU-s':>11} {'max RSS MiB':>12}"
    )
    for size in sizes:
        runs = [workload(size) for _ in range(args.repeat if size < 1_000_000 else max(1, args.repeat // 2))]
        commands = runs[0][0]
        seconds = statistics.median(wall for _, wall, _ in runs)
        cpu = statistics.median(c for _, _, c in runs)
        rates[size] = commands / cpu
        rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        print(
            f"{size:>10,} {commands:>12,} {seconds:>8.2f} {commands / seconds:>11,.0f} {cpu:>8.2f} "
            f"{rates[size]:>11,.0f} {rss:>12,.0f}",
            flush=True,
        )
    smallest, largest = min(sizes), max(sizes)
    print(f"rate (per CPU-second) at {largest:,} tasks / at {smallest:,} tasks: {rates[largest] / rates[smallest]:.2f}")


if __name__ == "__main__":
    main()
