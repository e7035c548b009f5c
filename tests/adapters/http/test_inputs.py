"""Part F over HTTP: inputs uploaded, read, listed, named in plans (specs/requirements/inputs.md).

The tests that name an input install a test action whose argument is declared with
`amc.core.inputs.input_argument`, exactly as `install` and `push` declare theirs, so the edge's
checks are seen apart from any one action.
"""

from __future__ import annotations

import hashlib
import os

import pytest

from amc.core import inputs
from tests.support.http import problem

req = pytest.mark.req


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def put(caller, data: bytes, digest: str | None = None, expect: int | None = 201, **params):
    path = f"/v1/inputs/{digest or sha(data)}"
    return caller.request("PUT", path, content=data, params=params or None, expect=expect)


def post(caller, data: bytes, expect: int | None = 201):
    return caller.request("POST", "/v1/inputs", content=data, expect=expect)


def listing(caller) -> list[dict]:
    return caller.call("GET", "/v1/inputs")["inputs"]


def naming(sha256: str) -> dict:
    return {"steps": [{"id": "put", "action": "fixture", "args": {"file": inputs.reference(sha256)}}]}


@req("UPLOAD/s1", "UPLOAD/s2")
def test_an_upload_answers_its_reference_and_reads_back(amc):
    data = os.urandom(300_000)
    first = put(amc.acme, data)
    body = first.json()
    assert body["ref"] == "sha256:" + sha(data) and body["sha256"] == sha(data) and body["size"] == len(data)
    assert body["in_use"] is False and first.headers["location"] == f"/v1/inputs/{sha(data)}"
    got = amc.acme.request("GET", f"/v1/inputs/{sha(data)}", expect=200)
    assert got.content == data and got.headers["etag"] == f'"{sha(data)}"'
    assert got.headers["content-length"] == str(len(data))
    again = put(amc.acme, data, expect=200).json()
    assert again == body
    other = b"posted bytes"
    posted = post(amc.acme, other).json()
    assert posted["sha256"] == sha(other)
    assert post(amc.acme, other, expect=200).json() == posted
    assert sorted(i["sha256"] for i in listing(amc.acme)) == sorted([sha(data), sha(other)])  # listed once each


@req("UPLOAD/s3")
def test_a_sha256_that_does_not_match_is_400_and_nothing_is_stored(amc):
    data, other = b"the bytes", b"other bytes"
    put(amc.acme, data, digest=sha(other), expect=400)
    assert problem(amc.acme) == (400, "invalid_request")
    assert sha(data) in amc.acme.last.json()["detail"]
    put(amc.acme, data, digest="ABC", expect=400)
    for digest in (sha(data), sha(other)):
        amc.acme.request("GET", f"/v1/inputs/{digest}", expect=404)
    assert listing(amc.acme) == []


@req("UPLOAD/s4")
def test_over_a_limit_is_413_naming_the_limit(make_amc):
    amc = make_amc(max_input_bytes=1000, max_tenant_input_bytes=1500)
    put(amc.acme, os.urandom(1001), expect=413)
    assert "1000" in amc.acme.last.json()["detail"] and "--max-input-bytes" in amc.acme.last.json()["detail"]

    def chunked():
        yield os.urandom(600)
        yield os.urandom(600)

    amc.acme.request("POST", "/v1/inputs", content=chunked(), expect=413)  # no Content-Length
    kept = os.urandom(900)
    put(amc.acme, kept)
    put(amc.acme, os.urandom(700), expect=413)
    detail = amc.acme.last.json()["detail"]
    assert "--max-tenant-input-bytes" in detail and "1500" in detail
    assert len(listing(amc.acme)) == 1
    post(amc.acme, os.urandom(700), expect=413)  # the same limit, decided once the bytes are in
    assert "--max-tenant-input-bytes" in amc.acme.last.json()["detail"]
    assert post(amc.acme, kept, expect=200).json()["sha256"] == sha(kept)  # a repeat at the limit
    put(amc.beta, os.urandom(900))  # another tenant has its own room


@req("UPLOAD/s5")
def test_another_tenant_neither_reads_nor_lists_an_input(amc):
    data = os.urandom(1000)
    put(amc.acme, data)
    theirs = amc.beta.request("GET", f"/v1/inputs/{sha(data)}", expect=404).json()["detail"]
    unknown = amc.beta.request("GET", f"/v1/inputs/{sha(b'nothing')}", expect=404).json()["detail"]
    assert theirs.replace(sha(data), "X") == unknown.replace(sha(b"nothing"), "X")
    assert listing(amc.beta) == []
    assert put(amc.beta, data).status_code == 201  # its own input now
    admin = amc.admin.call("GET", "/v1/inputs")["inputs"]
    assert sorted(i["tenant"] for i in admin) == ["acme", "beta"]


@req("UPLOAD/s6", "UPLOAD/s8")
def test_a_host_reads_an_input_only_while_it_holds_an_attempt_naming_it(amc, fixture_action):
    data = os.urandom(5000)
    put(amc.acme, data)
    path = f"/v1/inputs/{sha(data)}"
    task = amc.acme.submit(naming(sha(data)))
    amc.h1.register("h1", ["emulator-5554"])
    amc.h1.request("GET", path, expect=404)  # queued: no host holds it
    assert listing(amc.acme)[0]["in_use"] is True
    assignment = amc.h1.claim("h1")
    assert assignment["task_id"] == task["id"]
    assert amc.h1.request("GET", path, expect=200).content == data
    cut = amc.h1.request("GET", path, headers={"Range": "bytes=1000-"}, expect=206)
    assert cut.content == data[1000:] and cut.headers["content-range"] == f"bytes 1000-4999/{len(data)}"
    amc.h2.register("h2", ["emulator-5556"])
    other = amc.acme.submit()
    assert amc.h2.claim("h2")["task_id"] == other["id"]
    amc.h2.request("GET", path, expect=404)  # it holds an attempt, of a task not naming it
    amc.h1.report(task["id"], 1, assignment["lease_id"], "done")
    amc.h1.request("GET", path, expect=404)  # the attempt ended
    assert listing(amc.acme)[0]["in_use"] is False


@req("UPLOAD/s7")
def test_naming_an_input_the_tenant_does_not_have_is_400(amc, fixture_action):
    mine, theirs = os.urandom(100), os.urandom(100)
    put(amc.acme, mine)
    put(amc.beta, theirs)
    amc.acme.submit(naming(sha(theirs)), expect=400)
    foreign = amc.acme.last.json()["detail"]
    amc.acme.submit(naming(sha(b"never uploaded")), expect=400)
    unknown = amc.acme.last.json()["detail"]
    assert "'put'" in foreign and "'file'" in foreign and sha(theirs) in foreign
    assert foreign.replace(sha(theirs), "X") == unknown.replace(sha(b"never uploaded"), "X")
    amc.acme.submit(naming(sha(mine)))  # accepted
    # A session's action is checked alike.
    session = amc.acme.submit_session()
    amc.acme.act(
        session["id"], {"id": "a1", "action": "fixture", "args": {"file": inputs.reference(sha(theirs))}}, expect=400
    )
    assert sha(theirs) in amc.acme.last.json()["detail"]


def test_an_input_reference_elsewhere_is_refused_as_a_wrong_type(amc):
    data = b"x"
    put(amc.acme, data)
    plan = {"steps": [{"id": "s", "action": "shell", "args": {"command": inputs.reference(sha(data))}}]}
    amc.acme.submit(plan, expect=400)
    assert "command" in amc.acme.last.json()["detail"]


@req("UPLOAD/s7")
def test_a_steer_naming_an_input_the_tenant_does_not_have_is_400(amc, fixture_action):
    mine, theirs = os.urandom(100), os.urandom(100)
    put(amc.acme, mine)
    put(amc.beta, theirs)
    task = amc.acme.submit()
    step = {"id": "more", "action": "fixture", "args": {"file": inputs.reference(sha(theirs))}}
    amc.acme.post_message(task["id"], "steer", data={"insert_after": None, "steps": [step]}, expect=400)
    assert amc.acme.last.json()["detail"].startswith("data.steps[0].args.file names input sha256:" + sha(theirs))
    step["args"]["file"] = inputs.reference(sha(mine))
    amc.acme.post_message(task["id"], "steer", data={"insert_after": None, "steps": [step]})
