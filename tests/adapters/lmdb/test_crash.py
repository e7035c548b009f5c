"""Kill a loaded writer with SIGKILL, again and again on one directory; lose nothing.

Each round starts `crash_child` (a real process with 12 concurrent callers), waits until
it is busy, kills it at a random moment, and then, in this process: reopens the store
(start-up from the records), checks that every command whose reply any caller received,
in this round or an earlier one, is in the store, and runs `verify` (the replayed log
equals the records and the indexes, and the invariants hold).
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from amc.adapters.lmdb import LmdbService, verify
from tests.support.waiting import eventually

ROOT = Path(__file__).resolve().parents[3]
ROUNDS = 22
SEED = int(os.environ.get("AMC_CRASH_SEED", "20261130"))


def start_child(data: Path, acks: Path, seed: int, log: Path) -> subprocess.Popen:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    with log.open("ab") as err:
        return subprocess.Popen(
            [sys.executable, "-m", "tests.adapters.lmdb.crash_child", str(data), str(acks), str(seed)],
            cwd=ROOT,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=err,
        )


def acks_of(acks: Path, pid: int) -> int:
    if not acks.exists():
        return 0
    marker = f"{pid}-"
    return sum(marker in line for line in acks.read_text().splitlines())


def wait_until_busy(child: subprocess.Popen, acks: Path, log: Path, at_least: int = 30) -> None:
    def busy() -> bool:
        if child.poll() is not None:
            pytest.fail(f"the writer exited with {child.returncode}:\n{log.read_text()[-3000:]}")
        return acks_of(acks, child.pid) >= at_least

    try:
        eventually(busy, timeout=30, interval=0.01, what=f"{at_least} acknowledgements from the writer")
    except AssertionError:
        child.kill()
        raise


def check_acknowledged(service: LmdbService, lines: list[str]) -> None:
    """Every acknowledged command left its mark in the store."""
    renewals: Counter = Counter()
    for line in lines:
        kind, *args = line.split()
        if kind == "ready":
            continue
        if kind == "host":
            assert service.host(args[0]) is not None, line
            continue
        task = service.task(args[0])
        assert task is not None, line
        if kind == "submit":
            continue
        if kind == "cancel":
            assert task.cancellation is not None, line
            continue
        number = int(args[1])
        assert len(task.attempts) >= number, line
        attempt = task.attempts[number - 1]
        if kind == "claim":
            assert attempt.lease_id == args[2], line
        elif kind == "start":
            assert attempt.dispatched_at is not None, line
        elif kind == "renew":
            renewals[(task.id, number)] += 1
            assert attempt.renewals >= renewals[(task.id, number)], line
            assert attempt.lease_expires_at >= int(args[2]), line
        elif kind == "report":
            assert (task.result.status, task.result.attempt, task.result.reason) == (args[2], number, "reported"), line
            assert attempt.outcome == args[2], line
        else:
            raise AssertionError(f"unknown acknowledgement {line!r}")


@pytest.mark.slow
def test_every_acknowledged_command_survives_sigkill(tmp_path):
    data, acks, log = tmp_path / "store", tmp_path / "acks", tmp_path / "child.log"
    rng = random.Random(SEED)
    for round_number in range(ROUNDS):
        child = start_child(data, acks, SEED + round_number, log)
        try:
            wait_until_busy(child, acks, log)
            time.sleep(rng.uniform(0.0, 0.4))  # a random moment under load
        finally:
            os.kill(child.pid, signal.SIGKILL)
            child.wait()
        assert child.returncode == -signal.SIGKILL
        lines = acks.read_text().splitlines()
        assert acks_of(acks, child.pid) >= 30
        context = f"round {round_number}, seed {SEED}"
        with LmdbService.open(data) as service:  # start-up from the records, as a server would
            check_acknowledged(service, lines)
        differences = verify(data)
        assert differences == [], f"{context}: {differences}"
    kinds = Counter(line.split()[0] for line in acks.read_text().splitlines())
    assert kinds["report"] and kinds["cancel"] and kinds["renew"], kinds
