"""A real `amc serve` killed with SIGKILL while clients upload inputs: every input answered
201 reads back with its sha256 after the restart, and every listed input has all its bytes
(UPLOAD/s9). Short here; the pattern of tests/adapters/http/test_crash_http.py."""

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


@pytest.mark.req("UPLOAD/s9")
def test_every_201_input_survives_a_sigkill(tmp_path):
    tokens = tmp_path / "tokens.json"
    tokens.write_text(json.dumps([{"token": TOKEN, "role": "client", "tenant": "acme"}]))
    data = tmp_path / "data"
    served = Served(data, tokens=tokens)
    acknowledged: list[str] = []
    stop = threading.Event()

    def client() -> None:
        with httpx.Client(base_url=served.url, headers={"Authorization": f"Bearer {TOKEN}"}, timeout=10) as http:
            while not stop.is_set():
                body = os.urandom(int.from_bytes(os.urandom(2)) * 8)
                digest = hashlib.sha256(body).hexdigest()
                try:
                    response = http.put(f"/v1/inputs/{digest}", content=body)
                except httpx.HTTPError:
                    return  # the server died under this upload
                if response.status_code == 201:
                    acknowledged.append(digest)

    threads = [threading.Thread(target=client) for _ in range(4)]
    for thread in threads:
        thread.start()
    time.sleep(1.5)
    served.process.kill()  # SIGKILL
    served.process.wait()
    stop.set()
    for thread in threads:
        thread.join(15)
    assert acknowledged, "no upload was acknowledged before the kill"

    again = Served(data, tokens=tokens)
    try:
        with httpx.Client(base_url=again.url, headers={"Authorization": f"Bearer {TOKEN}"}, timeout=10) as http:
            listed = {i["sha256"] for i in http.get("/v1/inputs").json()["inputs"]}
            assert set(acknowledged) <= listed
            for digest in listed:
                got = http.get(f"/v1/inputs/{digest}")
                assert got.status_code == 200 and hashlib.sha256(got.content).hexdigest() == digest
    finally:
        again.stop()
