"""Artifacts through `amc serve` as a real process: its limit options, its blob stores, and
SIGKILL while uploads are in flight: after a restart every artifact that was answered 201
reads back with its sha256, and no record points at missing bytes (ARTIFACT/s8). The byte
store's own crash tests are in tests/adapters/lmdb/test_blobs.py."""

from __future__ import annotations

import hashlib
import json
import random
import signal
import threading
import time

import httpx
import pytest

from amc.adapters.lmdb.blobs import FileBlobStore
from amc.adapters.lmdb.verify import verify
from tests.support.http import http_client
from tests.support.plans import PLAN
from tests.support.served import Served

TOKENS = [
    {"token": "crash-client-acme-000000", "role": "client", "tenant": "acme"},
    {"token": "crash-host-h1-0000000000", "role": "host", "host_id": "h1"},
]
CLIENT, HOST = (t["token"] for t in TOKENS)
UPLOADERS = 4


def upload_until_stopped(url: str, task_id: str, lease_id: str, worker: int, stop: threading.Event, acked: list):
    """Upload distinct artifacts one after another; note each one answered 201."""
    rng = random.Random(worker)
    headers = {"Authorization": f"Bearer {HOST}", "Amc-Lease-Id": lease_id, "Content-Type": "application/x-test"}
    with http_client(url) as http:
        for n in range(10_000):
            if stop.is_set():
                return
            data = rng.randbytes(rng.randrange(1, 1_500_000))
            name = f"w{worker}-{n}.bin"
            try:
                response = http.put(
                    f"/v1/tasks/{task_id}/attempts/1/artifacts/{name}",
                    content=data,
                    params={"step": "open"},
                    headers=headers,
                )
            except httpx.HTTPError:
                return  # the server died under this request
            if response.status_code == 201:
                assert response.json()["sha256"] == hashlib.sha256(data).hexdigest()
                acked.append(response.json())
            else:
                return


@pytest.mark.req("ARTIFACT/s8")
@pytest.mark.slow
def test_every_artifact_answered_201_survives_sigkill_and_none_points_at_missing_bytes(tmp_path):
    tokens = tmp_path / "tokens.json"
    tokens.write_text(json.dumps(TOKENS))
    data = tmp_path / "data"
    served = Served(data, "--lease-seconds", "600", tokens=tokens)
    client, host = served.caller(CLIENT), served.caller(HOST)
    task = client.submit(PLAN)
    host.register("h1", ["emulator-5554"])
    lease = host.claim("h1")
    host.start(task["id"], 1, lease["lease_id"])

    stop, acked = threading.Event(), []
    workers = [
        threading.Thread(target=upload_until_stopped, args=(served.url, task["id"], lease["lease_id"], w, stop, acked))
        for w in range(UPLOADERS)
    ]
    for worker in workers:
        worker.start()
    deadline = time.monotonic() + 30
    while len(acked) < 12 and time.monotonic() < deadline:
        time.sleep(0.02)
    assert served.stop(signal.SIGKILL) == -signal.SIGKILL  # uploads are in flight now
    stop.set()
    for worker in workers:
        worker.join(30)
    assert len(acked) >= 12

    blobs = FileBlobStore.in_data_dir(data)
    served = Served(data, "--lease-seconds", "600", tokens=tokens)
    try:
        client = served.caller(CLIENT)
        listed = {a["id"]: a for a in client.artifacts(task["id"])}
        for artifact in acked:
            assert listed.get(artifact["id"]) == artifact, f"{artifact['name']} was answered 201 and lost"
        for artifact in listed.values():  # every record, acknowledged or not, has its bytes
            got = client.download(task["id"], artifact["id"]).content
            assert hashlib.sha256(got).hexdigest() == artifact["sha256"] and len(got) == artifact["size"]
        assert blobs.verify([a["sha256"] for a in listed.values()]) == []
        # What the crash left behind is only bytes nobody refers to.
        orphans = set(blobs.digests()) - {a["sha256"] for a in listed.values()}
        assert len(orphans) <= UPLOADERS
    finally:
        served.stop()
    assert verify(data) == []  # the store agrees with its log, artifacts included


@pytest.mark.req("ARTIFACT/s5")
@pytest.mark.parametrize("store", ["lmdb", "memory"])
def test_serve_takes_the_artifact_limits_and_keeps_the_bytes_by_its_store(tmp_path, store):
    tokens = tmp_path / "tokens.json"
    tokens.write_text(json.dumps(TOKENS))
    data = tmp_path / "data"
    served = Served(
        data, "--store", store, "--max-artifact-bytes", "10", "--max-task-artifact-bytes", "15", tokens=tokens
    )
    try:
        client, host = served.caller(CLIENT), served.caller(HOST)
        task = client.submit(PLAN)
        host.register("h1", ["emulator-5554"])
        lease = host.claim("h1")
        over = host.upload(task["id"], 1, lease["lease_id"], "big.txt", b"x" * 11, expect=413)
        assert "10 bytes" in over["detail"] and "--max-artifact-bytes" in over["detail"]
        kept = host.upload(task["id"], 1, lease["lease_id"], "one.txt", b"y" * 10)
        over = host.upload(task["id"], 1, lease["lease_id"], "two.txt", b"z" * 6, expect=413)
        assert "15 bytes" in over["detail"] and "--max-task-artifact-bytes" in over["detail"]
        assert client.download(task["id"], kept["id"]).content == b"y" * 10
    finally:
        served.stop()
    on_disk = sorted(FileBlobStore.in_data_dir(data).digests()) if (data / "artifacts").exists() else []
    assert on_disk == ([kept["sha256"]] if store == "lmdb" else [])
