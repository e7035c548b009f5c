"""The crash test over HTTP: `amc serve` on its LMDB store, under concurrent load from many
clients and hosts (tests/support/crashload.py), killed with SIGKILL at random moments, many
times in a row, and started again each time on the same data directory and port.

After each kill, with the server down: `amc store verify` passes, every artifact a record
names has its file, and the artifact gc removes exactly what the killed uploads left behind
(the unreferenced files and temporaries), nothing referenced. After each restart: every 2xx
any caller received is reflected (crashload.check_ledger), and every lease granted before the
kill and still within its term renews. Nothing acknowledged may be lost, and no request of
this load may get an answer a correct server would not give (a 5xx included).

`make test` runs a bounded campaign; `make crash` runs the long one (AMC_CRASH_KILLS kills,
AMC_CRASH_CLIENTS clients and as many hosts) and prints the figures of
docs/reliability.md.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from amc.adapters.lmdb.blobs import FileBlobStore
from amc.adapters.lmdb.store import Store
from amc.check.final import read_final_state
from amc.check.operations import read as read_history
from amc.check.recorder import HistoryFile
from amc.check.rules import Report, check, message_tasks
from tests.support import crashload
from tests.support.served import Served
from tests.support.waiting import free_port

KILLS = int(os.environ.get("AMC_CRASH_KILLS", "5"))
ACTORS = int(os.environ.get("AMC_CRASH_CLIENTS", "25"))  # clients, and as many hosts
LOAD_SECONDS = (float(os.environ.get("AMC_CRASH_MIN_S", "1.0")), float(os.environ.get("AMC_CRASH_MAX_S", "3.0")))
SEED = int(os.environ.get("AMC_CRASH_SEED", str(random.randrange(1 << 30))))


def store_verify(data: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-c", "from amc.cli import main; main()", "store", "verify", "--data", str(data)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, f"amc store verify after a kill: {done.stdout}{done.stderr}"


def check_files_and_collect_orphans(data: Path) -> int:
    """With the server down: every recorded artifact has its file; gc removes exactly the rest.
    Returns the number of files the gc removed."""
    store = Store.open(data, readonly=True)
    try:
        state = store.load_state()
    finally:
        store.close()
    referenced = {a.sha256: a.size for task in state.tasks.values() for a in task.artifacts}
    blobs = FileBlobStore.in_data_dir(data)
    missing = [sha for sha, size in referenced.items() if blobs.size_of(sha) != size]
    assert not missing, f"records point at missing or short artifact files: {missing}"
    orphans = set(blobs.digests()) - set(referenced)
    temporaries = blobs.temporaries()
    collected = blobs.gc(referenced, grace_s=0)
    assert (collected.blobs, collected.temporaries) == (len(orphans), len(temporaries))
    assert set(blobs.digests()) == set(referenced) and not blobs.temporaries()
    assert all(blobs.size_of(sha) == size for sha, size in referenced.items())
    return collected.blobs + collected.temporaries


class Campaign:
    def __init__(self, tmp_path: Path, kills: int, actors: int, seed: int):
        self.data = tmp_path / "data"
        self.tokens = tmp_path / "tokens.json"
        self.tokens.write_text(json.dumps(crashload.tokens_for(actors)))
        self.log = tmp_path / "serve.log"
        self.port = free_port()
        self.kills = kills
        self.rng = random.Random(seed)
        self.ledger = crashload.Ledger()
        self.clients = [crashload.ClientActor(i, self.ledger, random.Random(self.rng.random())) for i in range(actors)]
        self.hosts = [crashload.HostActor(i, self.ledger, random.Random(self.rng.random())) for i in range(actors)]
        self.checked = self.leases_renewed = self.collected = self.kills_survived = 0
        self.lost: list[str] = []
        self.history = HistoryFile(tmp_path / "history.jsonl")
        self.checked_history: Report | None = None

    def serve(self) -> Served:
        options = ("--lease-seconds", str(crashload.LEASE_SECONDS))
        return Served(self.data, *options, tokens=self.tokens, port=self.port, log=self.log)

    async def run(self) -> None:
        served = self.serve()
        for _ in range(self.kills):
            await self.load_then_kill(served)
            store_verify(self.data)
            self.collected += check_files_and_collect_orphans(self.data)
            served = self.serve()
            await self.check(served)
            self.kills_survived += 1
        self.checked_history = await asyncio.to_thread(self.check_history, served.url)
        served.stop()
        store_verify(self.data)

    async def load_then_kill(self, served: Served) -> None:
        stop = asyncio.Event()
        async with crashload.async_client(served.url, self.history) as http:
            actors = [asyncio.create_task(crashload.run_actor(a, http, stop)) for a in [*self.clients, *self.hosts]]
            await asyncio.sleep(self.rng.uniform(*LOAD_SECONDS))
            served.process.send_signal(signal.SIGKILL)
            assert served.process.wait(30) == -signal.SIGKILL
            stop.set()
            await asyncio.gather(*actors)
        served.http.close()
        crashload.forget_unknown_outcomes(self.hosts)

    async def check(self, served: Served) -> None:
        async with crashload.async_client(served.url, self.history) as http:
            report = await crashload.check_ledger(http, self.ledger, self.hosts)
        self.checked += report.checked
        self.leases_renewed += report.leases_renewed
        self.lost += report.lost

    def check_history(self, url: str) -> Report:
        """The history checker over every operation the actors saw, against the final state."""
        history = read_history([self.history.path])
        final = read_final_state(url, crashload.admin_token(), message_tasks(history.operations))
        return check(history, final)

    def figures(self) -> str:
        kinds = ", ".join(f"{kind} {n}" for kind, n in sorted(self.ledger.by_kind.items()))
        return (
            f"crash test over HTTP: {self.kills_survived} SIGKILLs survived with {len(self.clients)} clients and "
            f"{len(self.hosts)} hosts; {self.ledger.total} operations acknowledged ({kinds}); "
            f"{self.checked} acknowledgements checked after the restarts, {len(self.lost)} lost; "
            f"{self.leases_renewed} leases renewed after a restart; {self.collected} orphaned artifact files collected; "
            f"history checker: {self.checked_history.summary() if self.checked_history else 'not run'}"
        )


@pytest.mark.req("RELIABILITY/s1", "RELIABILITY/s2", "RELIABILITY/s3", "ARTIFACT/s8", "SAFETY/s1")
@pytest.mark.slow
def test_every_acknowledged_operation_survives_repeated_sigkills_under_load(tmp_path):
    """...and the clients' recorded histories pass the history checker (SAFETY/s1)."""
    campaign = Campaign(tmp_path, KILLS, ACTORS, SEED)
    started = time.monotonic()
    asyncio.run(campaign.run())
    print(f"\n{campaign.figures()} (seed {SEED}, {time.monotonic() - started:.0f} s)")
    assert not campaign.lost, f"lost after a kill (seed {SEED}): {campaign.lost[:20]}"
    assert not campaign.ledger.unexpected, f"answers no correct server gives: {campaign.ledger.unexpected[:20]}"
    assert campaign.kills_survived == KILLS
    assert campaign.checked_history is not None and campaign.checked_history.ok, campaign.checked_history
    # The load did exercise every kind of write, and leases did cross kills.
    kinds = {"submit", "submit with key", "claim", "start", "renew", "result", "release", "cancel", "message"}
    assert kinds <= set(campaign.ledger.by_kind), campaign.ledger.by_kind
    assert campaign.ledger.by_kind["artifact upload"] > 0 and campaign.leases_renewed > 0
