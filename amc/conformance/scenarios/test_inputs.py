"""Inputs, specs/protocol.md Part F (specs/requirements/inputs.md): files a client uploads
once, names in plans, and the hosts running those tasks read.

The limit checked is the protocol's default (one input at most 512 MiB), by a declared
`Content-Length` refused before the body is read. The scenarios that need a task naming an
input use `install` (Part F's first action taking one) and are skipped, saying so, by a
server that has no such action yet.
"""

from __future__ import annotations

import hashlib
import json
import os
import socket
from typing import Any

import pytest

from amc.conformance.client import Caller

MiB = 1024 * 1024
DEFAULT_MAX_INPUT_BYTES = 512 * MiB


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def put_input(caller: Caller, data: bytes, digest: str | None = None, *, expect: Any = 201) -> Any:
    return caller.call("PUT", f"/v1/inputs/{digest or sha256(data)}", content=data, expect=expect)


def listed(caller: Caller) -> set[str]:
    return {i["sha256"] for i in caller.call("GET", "/v1/inputs")["inputs"]}


def naming_plan(digest: str) -> dict[str, Any]:
    return {"steps": [{"id": "install", "action": "install", "args": {"input": {"input": f"sha256:{digest}"}}}]}


@pytest.mark.req("UPLOAD/s1", "UPLOAD/s2")
def test_an_upload_answers_its_reference_reads_back_and_repeats_as_200(scene):
    acme = scene.acme
    data = os.urandom(300_000)
    stored = put_input(acme, data)
    assert stored["ref"] == f"sha256:{sha256(data)}" and stored["size"] == len(data)
    assert acme.last.headers["location"] == f"/v1/inputs/{sha256(data)}"
    got = acme.send("GET", f"/v1/inputs/{sha256(data)}")
    assert got.status_code == 200 and got.content == data
    assert got.headers["etag"] == f'"{sha256(data)}"'
    assert put_input(acme, data, expect=200) == stored
    posted_bytes = os.urandom(1000)
    posted = acme.call("POST", "/v1/inputs", content=posted_bytes, expect=201)
    assert posted["sha256"] == sha256(posted_bytes)
    assert acme.call("POST", "/v1/inputs", content=posted_bytes, expect=200) == posted
    assert {sha256(data), sha256(posted_bytes)} <= listed(acme)


@pytest.mark.req("UPLOAD/s3")
def test_a_sha256_that_does_not_match_is_400_and_nothing_is_stored(scene):
    acme = scene.acme
    data, other = os.urandom(500), os.urandom(500)
    refused = put_input(acme, data, sha256(other), expect=(400, "invalid_request"))
    assert sha256(data) in refused["detail"], "the detail names the sha256 the bytes have"
    put_input(acme, data, "not-a-sha256", expect=(400, "invalid_request"))
    for digest in (sha256(data), sha256(other)):
        acme.call("GET", f"/v1/inputs/{digest}", expect=(404, "not_found"))
    assert not {sha256(data), sha256(other)} & listed(acme)


@pytest.mark.req("UPLOAD/s4")
def test_an_input_over_the_limit_is_413_naming_it(scene):
    # Only the head is sent: a server refuses the declared size before it reads any body.
    url = scene.acme.connection.http.base_url
    with socket.create_connection((url.host, url.port), timeout=30) as conn:
        head = (
            f"POST /v1/inputs HTTP/1.1\r\nHost: {url.host}\r\nAuthorization: Bearer {scene.acme.token}\r\n"
            f"Content-Length: {DEFAULT_MAX_INPUT_BYTES + 1}\r\nConnection: close\r\n\r\n"
        )
        conn.sendall(head.encode())
        answer = b""
        while chunk := conn.recv(65536):
            answer += chunk
    status_line, _, rest = answer.partition(b"\r\n")
    assert b" 413 " in status_line, answer[:300]
    body = json.loads(rest.partition(b"\r\n\r\n")[2])
    assert body["code"] == "payload_too_large"
    assert str(DEFAULT_MAX_INPUT_BYTES) in body["detail"], "the detail names the limit"


@pytest.mark.req("UPLOAD/s5")
def test_another_tenant_neither_reads_nor_lists_an_input(scene):
    acme, beta, h1 = scene.acme, scene.beta, scene.h1
    data = os.urandom(2000)
    put_input(acme, data)
    theirs = beta.call("GET", f"/v1/inputs/{sha256(data)}", expect=(404, "not_found"))
    nobody = sha256(os.urandom(8))
    unknown = beta.call("GET", f"/v1/inputs/{nobody}", expect=(404, "not_found"))
    assert theirs["detail"].replace(sha256(data), "X") == unknown["detail"].replace(nobody, "X")
    assert sha256(data) not in listed(beta)
    h1.caller.call("GET", f"/v1/inputs/{sha256(data)}", expect=(404, "not_found"))  # holds no attempt
    assert put_input(beta, data)["sha256"] == sha256(data)  # its own input now


@pytest.mark.req("UPLOAD/s7")
def test_naming_an_input_the_tenant_does_not_have_is_400(scene):
    acme, beta = scene.acme, scene.beta
    theirs = os.urandom(100)
    put_input(beta, theirs)
    foreign = scene.submit(acme, plan=naming_plan(sha256(theirs)), expect=(400, "invalid_request"))
    nobody = sha256(os.urandom(8))
    unknown = scene.submit(acme, plan=naming_plan(nobody), expect=(400, "invalid_request"))
    if "unknown action" in foreign["detail"]:
        pytest.skip("the server has no action that takes an input yet (install)")
    assert sha256(theirs) in foreign["detail"]
    assert foreign["detail"].replace(sha256(theirs), "X") == unknown["detail"].replace(nobody, "X")


@pytest.mark.req("UPLOAD/s6", "UPLOAD/s8")
def test_a_host_reads_an_input_only_while_it_holds_an_attempt_naming_it(scene):
    acme, h1 = scene.acme, scene.h1
    data = os.urandom(3000)
    put_input(acme, data)
    response = acme.send("POST", "/v1/tasks", {"plan": naming_plan(sha256(data)), "requirements": scene.requirements()})
    if response.status_code == 400 and "unknown action" in response.json().get("detail", ""):
        pytest.skip("the server has no action that takes an input yet (install)")
    assert response.status_code == 201, response.text
    task = response.json()
    acme.created.append(task["id"])
    path = f"/v1/inputs/{sha256(data)}"
    h1.register(scene.device("emulator-5554"))
    h1.caller.call("GET", path, expect=(404, "not_found"))
    assert {i["sha256"]: i["in_use"] for i in acme.call("GET", "/v1/inputs")["inputs"]}[sha256(data)] is True
    lease = h1.claim()
    assert lease is not None and lease.task_id == task["id"]
    assert h1.caller.send("GET", path).content == data
    h1.report(lease, "failed")
    h1.caller.call("GET", path, expect=(404, "not_found"))
