"""A writer under concurrent load, for the crash test to kill with SIGKILL.

    python -m tests.adapters.lmdb.crash_child DATA_DIR ACK_FILE SEED

Opens the store, then runs `WORKERS` concurrent callers on one event loop, each driving
task lifecycles (submit, claim, start, renew, cancel or not, report; some leases are
abandoned to expire). A line is appended to ACK_FILE only after the reply arrived, with
one unbuffered write(2), so after a SIGKILL the file holds exactly the acknowledgements
a caller could have seen. Runs until killed.
"""

from __future__ import annotations

import asyncio
import os
import random
import sys

from amc.adapters.lmdb import LmdbService
from amc.core.commands import CancelTask, ClaimTask, RegisterHost, RenewLease, ReportResult, StartAttempt, SubmitTask
from amc.core.kernel import Assignment
from amc.core.records import DeviceSpec
from tests.support.plans import PLAN_RECORD as PLAN

WORKERS = 12
LEASE_MS = 1_500  # short, so leases abandoned in one run expire during the next ones


async def main(path: str, ack_path: str, seed: int) -> None:
    service = LmdbService.open(path, clock="system")
    fd = os.open(ack_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    run = os.getpid()

    def ack(line: str) -> None:
        os.write(fd, f"{line}\n".encode())

    async def worker(w: int) -> None:
        rng = random.Random(seed * 1000 + w)
        host = f"h{run}-{w}"
        await service.execute(RegisterHost(now=0, host_id=host, devices=(DeviceSpec(serial=f"s{w}"),)))
        ack(f"host {host}")
        n = 0
        while True:
            n += 1
            task_id = f"t{run}-{w}-{n}"
            await service.execute(
                SubmitTask(now=0, task_id=task_id, tenant=f"tenant{w % 3}", plan=PLAN, max_attempts=2)
            )
            ack(f"submit {task_id}")
            claimed = await service.execute(ClaimTask(now=0, host_id=host, lease_id=f"L-{task_id}", lease_ms=LEASE_MS))
            if not isinstance(claimed.reply, Assignment):
                continue
            a = claimed.reply  # not necessarily this task: any queued one fits this device
            ack(f"claim {a.task_id} {a.attempt} {a.lease_id}")
            lease = dict(now=0, host_id=host, task_id=a.task_id, attempt=a.attempt, lease_id=a.lease_id)
            if (await service.execute(StartAttempt(**lease))).accepted:
                ack(f"start {a.task_id} {a.attempt}")
            for _ in range(rng.randint(0, 2)):
                renewed = await service.execute(RenewLease(**lease))
                if renewed.accepted:
                    ack(f"renew {a.task_id} {a.attempt} {renewed.reply.lease_expires_at}")
            roll = rng.random()
            if roll < 0.1:
                continue  # abandon the lease: it expires later, maybe in another run
            status = rng.choice(("done", "failed"))
            if roll < 0.25:
                cancelled = await service.execute(
                    CancelTask(now=0, task_id=a.task_id, tenant=None, reason="crash test")
                )
                if cancelled.accepted:
                    ack(f"cancel {a.task_id}")
                    status = "cancelled"
            reported = await service.execute(ReportResult(**lease, status=status, metadata={"run": run}))
            if reported.accepted:
                ack(f"report {a.task_id} {a.attempt} {status}")

    ack(f"ready {run}")
    await asyncio.gather(*(worker(w) for w in range(WORKERS)))


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2], int(sys.argv[3])))
