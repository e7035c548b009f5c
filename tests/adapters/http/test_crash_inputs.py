"""A real `amc serve` killed with SIGKILL while clients upload inputs: after each restart,
every input answered 201 so far reads back with its sha256, and every listed input has all
its bytes (UPLOAD/s9). `make test` kills once; `make crash` kills AMC_CRASH_KILLS times.
The pattern of tests/adapters/http/test_crash_http.py."""

from __future__ import annotations

import hashlib
import json
import os
import threading
import time

import httpx
import pytest

from tests.support.served import Served

TOKEN = "crash-inputs-client-acme-000"
KILLS = int(os.environ.get("AMC_CRASH_KILLS", "1"))
CLIENTS = 4


def upload_until_cut(url: str, acknowledged: list[str], stop: threading.Event) -> None:
    with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {TOKEN}"}, timeout=10) as http:
        while not stop.is_set():
            body = os.urandom(int.from_bytes(os.urandom(2)) * 8)  # up to 512 KiB
            digest = hashlib.sha256(body).hexdigest()
            try:
                response = http.put(f"/v1/inputs/{digest}", content=body)
            except httpx.HTTPError:
                return  # the server died under this upload
            if response.status_code == 201:
                acknowledged.append(digest)


def check_every_input(url: str, acknowledged: list[str]) -> None:
    with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {TOKEN}"}, timeout=30) as http:
        listed = {i["sha256"] for i in http.get("/v1/inputs").json()["inputs"]}
        assert set(acknowledged) <= listed, sorted(set(acknowledged) - listed)[:3]
        for digest in listed:
            got = http.get(f"/v1/inputs/{digest}")
            assert got.status_code == 200 and hashlib.sha256(got.content).hexdigest() == digest


@pytest.mark.req("UPLOAD/s9")
def test_every_201_input_survives_a_sigkill(tmp_path):
    tokens = tmp_path / "tokens.json"
    tokens.write_text(json.dumps([{"token": TOKEN, "role": "client", "tenant": "acme"}]))
    data = tmp_path / "data"
    acknowledged: list[str] = []
    for _ in range(KILLS):
        served = Served(data, tokens=tokens)
        check_every_input(served.url, acknowledged)  # a restart after the previous kill
        stop = threading.Event()
        threads = [
            threading.Thread(target=upload_until_cut, args=(served.url, acknowledged, stop)) for _ in range(CLIENTS)
        ]
        before = len(acknowledged)
        for thread in threads:
            thread.start()
        time.sleep(1.5)
        served.process.kill()  # SIGKILL, with uploads in flight
        served.process.wait()
        stop.set()
        for thread in threads:
            thread.join(15)
        assert len(acknowledged) > before, "no upload was acknowledged before the kill"
    again = Served(data, tokens=tokens)
    try:
        check_every_input(again.url, acknowledged)
    finally:
        again.stop()
    print(f"\n{KILLS} SIGKILLs during input uploads: {len(acknowledged)} acknowledged inputs, every one intact")
