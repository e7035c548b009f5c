"""A full disk and a store at its size ceiling, through `amc serve` as a real process.

The data directory lives on a tmpfs of a few MiB that the test mounts (tests/support/tmpfs.py)
and fills with a filler file. While it is full: writes are refused with 503
`storage_unavailable` and `Retry-After`, reads are served, nothing acknowledged is lost, and a
refused write leaves no trace (the retried submit under the same idempotency key is created
then, not found). Once the filler is deleted, writes resume without a restart. The store
starts on a 64 KiB LMDB map, which grows on its own under the same load.

`make crash` runs the fill/free cycle more often (AMC_DISK_FULL_CYCLES) and prints the count
of recoveries for docs/reliability.md.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys

import pytest

from tests.support.http import Caller
from tests.support.plans import PLAN
from tests.support.served import Served
from tests.support.tmpfs import fill, mounted_tmpfs
from tests.support.waiting import eventually

TOKENS = [
    {"token": "disk-client-acme-00000000", "role": "client", "tenant": "acme"},
    {"token": "disk-host-h1-000000000000", "role": "host", "host_id": "h1"},
]
CLIENT, HOST = (t["token"] for t in TOKENS)
LABELS = {f"label{i}": "v" * 200 for i in range(10)}  # about 2 KiB a task, to fill pages quickly
CYCLES = int(os.environ.get("AMC_DISK_FULL_CYCLES", "2"))
TINY_MAP = 64 * 1024


def all_task_ids(client: Caller) -> list[str]:
    ids, after = [], None
    while True:
        page = client.tasks(limit=1000, **({"after": after} if after else {}))
        ids += [t["id"] for t in page["tasks"]]
        if not (after := page["next"]):
            return ids


def durable_view(client: Caller) -> list[dict]:
    """Every task as the server shows it, less what is kept in memory only (progress, liveness)."""
    tasks, after = [], None
    while True:
        page = client.tasks(limit=1000, **({"after": after} if after else {}))
        tasks += page["tasks"]
        if not (after := page["next"]):
            break
    for task in tasks:
        task.pop("waiting", None)
        for attempt in task["attempts"]:
            attempt.pop("progress", None)
    return sorted(tasks, key=lambda t: t["id"])


def assert_storage_unavailable(response) -> None:
    assert response.status_code == 503, response.text
    assert response.json()["code"] == "storage_unavailable"
    assert response.headers["retry-after"].isdigit() and int(response.headers["retry-after"]) > 0


def store_verify(data) -> str:
    done = subprocess.run(
        [sys.executable, "-c", "from amc.cli import main; main()", "store", "verify", "--data", str(data)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


class Ledger:
    """What the server acknowledged: tasks by id (with their idempotency key), artifacts."""

    def __init__(self) -> None:
        self.tasks: dict[str, str | None] = {}
        self.artifacts: list[dict] = []

    def check(self, client: Caller) -> int:
        """Every acknowledged task and artifact is there; the server shows no task beyond them."""
        listed = all_task_ids(client)
        assert sorted(listed) == sorted(self.tasks), "the tasks listed differ from the tasks acknowledged"
        for artifact in self.artifacts:
            got = client.download(artifact["task_id"], artifact["id"]).content
            assert hashlib.sha256(got).hexdigest() == artifact["sha256"]
        return len(self.tasks) + len(self.artifacts)


@pytest.mark.req("STORAGE-FULL/s1", "STORAGE-FULL/s2", "STORAGE-FULL/s3", "STORAGE-MAP/s1")
@pytest.mark.slow
def test_a_full_disk_refuses_writes_with_503_serves_reads_loses_nothing_and_recovers_without_a_restart(tmp_path):
    tokens = tmp_path / "tokens.json"
    tokens.write_text(json.dumps(TOKENS))
    log = tmp_path / "serve.log"
    ledger = Ledger()
    with mounted_tmpfs(tmp_path / "fs", 16 << 20) as fs:
        data = fs / "data"
        served = Served(data, "--map-size", str(TINY_MAP), "--lease-seconds", "600", tokens=tokens, log=log)
        try:
            client, host = served.caller(CLIENT), served.caller(HOST)
            # The map grows on its own: ~600 KiB of tasks on a 64 KiB map, every submit 201.
            for _ in range(300):
                ledger.tasks[client.submit(PLAN, labels=LABELS)["id"]] = None
            assert (data / "data.mdb").stat().st_size > 4 * TINY_MAP
            host.register("h1", ["emulator-5554"])
            lease = host.claim("h1")
            task_id = lease["task_id"]
            host.start(task_id, 1, lease["lease_id"])
            ledger.artifacts.append(host.upload(task_id, 1, lease["lease_id"], "before.bin", os.urandom(100_000)))

            recoveries = 0
            for cycle in range(CYCLES):
                filler = fs / "filler"
                fill(filler)
                # An artifact needs new space: refused, and its partial bytes do not stay.
                evidence = os.urandom(256 * 1024)
                name = f"cycle-{cycle}.bin"
                refused = host.upload(task_id, 1, lease["lease_id"], name, evidence, expect=503)
                assert refused["code"] == "storage_unavailable"
                assert_storage_unavailable(host.last)
                assert not list((data / "artifacts" / "tmp").iterdir())
                # Submits fill what free pages the map still has, then are refused.
                refused_key = None
                for n in range(2000):
                    key = f"full-{cycle}-{n}"
                    response = client.request(
                        "POST", "/v1/tasks", json={"plan": PLAN, "labels": LABELS, "idempotency_key": key}
                    )
                    if response.status_code == 503:
                        assert_storage_unavailable(response)
                        refused_key = key
                        break
                    assert response.status_code == 201, response.text
                    ledger.tasks[response.json()["id"]] = key
                assert refused_key is not None, "the disk is full, yet every submit was stored"
                # Reads go on, and show exactly what was acknowledged: nothing half-applied.
                ledger.check(client)
                assert client.task(task_id)["status"] == "dispatched"
                assert client.history(task_id)

                filler.unlink()
                # Writes resume, no restart: the refused submit was never kept, so its retry creates it.
                created = eventually(
                    lambda key=refused_key: client.request(
                        "POST", "/v1/tasks", json={"plan": PLAN, "labels": LABELS, "idempotency_key": key}
                    ),
                    what="a submit accepted after the space was freed",
                )
                assert created.status_code == 201, created.text
                ledger.tasks[created.json()["id"]] = refused_key
                ledger.artifacts.append(host.upload(task_id, 1, lease["lease_id"], name, evidence))
                host.renew(task_id, 1, lease["lease_id"])
                recoveries += 1
            checked = ledger.check(client)
            before_restart = durable_view(client)
        finally:
            served.stop()
        assert "OK" in store_verify(data)
        # Everything acknowledged is durable: a restart shows the same.
        served = Served(data, tokens=tokens, log=log)
        try:
            ledger.check(served.caller(CLIENT))
            # What the server held in memory through the refused writes is what was on disk.
            assert durable_view(served.caller(CLIENT)) == before_restart
        finally:
            served.stop()
    assert recoveries == CYCLES
    print(f"\nfull disk: {recoveries} disk-full recoveries; {checked} acknowledged operations checked, 0 lost")


@pytest.mark.req("STORAGE-MAP/s1", "STORAGE-MAP/s2")
def test_a_store_at_its_map_ceiling_refuses_writes_with_503_and_keeps_serving_reads(tmp_path):
    """No mount needed: the ceiling is the limit instead of the disk (`--max-map-size`)."""
    tokens = tmp_path / "tokens.json"
    tokens.write_text(json.dumps(TOKENS))
    data = tmp_path / "data"
    served = Served(
        data, "--map-size", str(TINY_MAP), "--max-map-size", str(8 * TINY_MAP), tokens=tokens, log=tmp_path / "log"
    )
    ledger = Ledger()
    try:
        client = served.caller(CLIENT)
        for _ in range(1000):
            response = client.request("POST", "/v1/tasks", json={"plan": PLAN, "labels": LABELS})
            if response.status_code == 503:
                assert_storage_unavailable(response)
                break
            assert response.status_code == 201, response.text
            ledger.tasks[response.json()["id"]] = None
        else:
            pytest.fail("the store grew past its --max-map-size")
        # It did grow, on its own, up to the ceiling first (the data file cannot pass the map).
        assert (data / "data.mdb").stat().st_size > 4 * TINY_MAP and len(ledger.tasks) > 20
        ledger.check(client)
        # A small write may still fit in a page freed meanwhile; a large one never does.
        again = client.request("POST", "/v1/tasks", json={"plan": PLAN, "labels": LABELS})
        assert_storage_unavailable(again)
    finally:
        served.stop()
    assert "OK" in store_verify(data)
