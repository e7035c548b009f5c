"""Part C over HTTP: uploads streamed into the blob store and recorded, listings, downloads.

The kernel's rules (lease checks, names, steps, limits) have model tests of the same ids
(tests/model/test_artifacts.py); here they are checked through the wire, with the bytes.
"""

from __future__ import annotations

import hashlib
import os

import pytest

from tests.support.http import problem
from tests.support.plans import TWO_STEPS

req = pytest.mark.req


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@req("ARTIFACT/s1", "ARTIFACT/s6", "ARTIFACT/s7")
def test_an_upload_reads_back_byte_for_byte_with_its_sha256(amc):
    task_id, a = amc.claimed(start=True, plan=TWO_STEPS)
    png, xml = os.urandom(300_000), b"<hierarchy/>"
    first = amc.h1.upload(task_id, 1, a["lease_id"], "screen.png", png, step="look", content_type="image/png")
    assert amc.h1.last.headers["location"] == f"/v1/tasks/{task_id}/artifacts/{first['id']}"
    assert {k: first[k] for k in ("task_id", "attempt", "step", "name", "content_type", "size", "sha256")} == {
        "task_id": task_id,
        "attempt": 1,
        "step": "look",
        "name": "screen.png",
        "content_type": "image/png",
        "size": len(png),
        "sha256": sha(png),
    }
    second = amc.h1.upload(task_id, 1, a["lease_id"], "ui.xml", xml, content_type=None)
    assert second["content_type"] == "application/octet-stream"  # ARTIFACT/s1: a missing type
    assert amc.acme.artifacts(task_id) == [first, second]  # upload order
    assert amc.h1.artifacts(task_id) == [first, second]  # the host holding an attempt reads it too
    got = amc.acme.download(task_id, first["id"])
    assert got.content == png and sha(got.content) == first["sha256"]
    assert got.headers["etag"] == f'"{sha(png)}"'
    assert got.headers["content-length"] == str(len(png)) and got.headers["content-type"] == "image/png"
    stored = [e for e in amc.acme.history(task_id) if e["type"] == "artifact_stored"]
    assert [e["data"] for e in stored] == [
        {"id": x["id"], "step": x["step"], "name": x["name"], "size": x["size"], "sha256": x["sha256"]}
        for x in (first, second)
    ]


@req("ARTIFACT/s2")
def test_a_repeated_upload_is_the_same_artifact_and_other_bytes_conflict(amc):
    task_id, a = amc.claimed(start=True)
    first = amc.h1.upload(task_id, 1, a["lease_id"], "log.txt", b"line 1\n", content_type="text/plain")
    again = amc.h1.upload(task_id, 1, a["lease_id"], "log.txt", b"line 1\n", content_type="text/plain", expect=200)
    assert again == first
    amc.h1.upload(task_id, 1, a["lease_id"], "log.txt", b"line 2\n", expect=409)
    assert problem(amc.h1) == (409, "artifact_conflict")
    assert amc.acme.artifacts(task_id) == [first]
    got = amc.acme.download(task_id, first["id"])
    assert got.content == b"line 1\n" and got.headers["content-type"] == "text/plain"  # as uploaded, no charset added


@req("ARTIFACT/s3")
def test_stale_and_foreign_attempts_never_add_evidence(amc):
    task_id, a = amc.claimed(start=True, lease_seconds=10)
    amc.h2.register("h2", ["emulator-5556"])
    amc.h2.upload(task_id, 1, a["lease_id"], "x.txt", b"x", expect=409)
    assert problem(amc.h2) == (409, "lease_foreign")
    amc.h1.upload(task_id, 1, "l_not-the-lease", "x.txt", b"x", expect=409)
    assert problem(amc.h1) == (409, "lease_unknown")
    amc.admin.advance(11)  # the lease expires; the task is queued again
    amc.h1.upload(task_id, 1, a["lease_id"], "x.txt", b"x", expect=409)
    assert problem(amc.h1) == (409, "lease_expired")
    b = amc.h1.claim("h1")
    amc.h1.upload(task_id, 1, a["lease_id"], "x.txt", b"x", expect=409)
    assert problem(amc.h1) == (409, "lease_replaced")
    amc.h1.start(task_id, 2, b["lease_id"])
    amc.h1.report(task_id, 2, b["lease_id"], "done")
    amc.h1.upload(task_id, 2, b["lease_id"], "x.txt", b"x", expect=409)
    assert problem(amc.h1) == (409, "lease_ended")
    assert amc.acme.artifacts(task_id) == []


@req("ARTIFACT/s6")
def test_other_tenants_and_other_hosts_get_404(amc):
    task_id, a = amc.claimed(start=True)
    artifact = amc.h1.upload(task_id, 1, a["lease_id"], "x.txt", b"x")
    for caller in (amc.beta, amc.h2):
        caller.artifacts(task_id, expect=404)
        caller.download(task_id, artifact["id"], expect=404)
    amc.acme.download(task_id, "a_unknown", expect=404)
    amc.acme.artifacts("t_unknown", expect=404)
    amc.anon.artifacts(task_id, expect=401)
    amc.acme.upload(task_id, 1, a["lease_id"], "y.txt", b"y", expect=403)  # only the owning host uploads
    amc.h1.upload(task_id, 9, a["lease_id"], "y.txt", b"y", expect=404)
    amc.h1.upload("t_unknown", 1, a["lease_id"], "y.txt", b"y", expect=404)


@req("ARTIFACT/s4")
# A bare `.` or `..` segment is resolved away by the client (RFC 3986); sent escaped, the
# server decodes it and refuses it.
@pytest.mark.parametrize("name", ["%2E%2E", "%2E", "a..b", "a b", "ü.txt", "x" * 129])
def test_a_bad_name_is_400(amc, name):
    task_id, a = amc.claimed(start=True)
    amc.h1.upload(task_id, 1, a["lease_id"], name, b"x", expect=400)
    assert problem(amc.h1) == (400, "invalid_request")
    assert amc.acme.artifacts(task_id) == []


@req("ARTIFACT/s4")
@pytest.mark.parametrize("name", ["a/b", "a%2Fb", "..%2Fx", "x%2F..%2Fy"])
def test_a_name_with_a_slash_is_400_not_another_path(amc, name):
    # OpenAPI cannot describe a path parameter holding "/", so these go around the
    # contract check: the route takes the rest of the path as the name and refuses it.
    task_id, a = amc.claimed(start=True)
    path = f"/v1/tasks/{task_id}/attempts/1/artifacts/{name}"
    headers = {"Authorization": f"Bearer {amc.h1.token}", "Amc-Lease-Id": a["lease_id"]}
    response = amc.http.put(path, content=b"x", params={"step": "open"}, headers=headers)
    assert (response.status_code, response.json()["code"]) == (400, "invalid_request"), response.text
    assert amc.acme.artifacts(task_id) == []


@req("ARTIFACT/s4")
def test_an_unknown_step_a_missing_step_or_lease_is_400(amc):
    task_id, a = amc.claimed(start=True)
    body = amc.h1.upload(task_id, 1, a["lease_id"], "x.txt", b"x", step="nowhere", expect=400)
    assert "'nowhere'" in body["detail"]
    body = amc.h1.upload(task_id, 1, a["lease_id"], "x.txt", b"x", step=None, expect=400)
    assert "step" in body["detail"]
    body = amc.h1.upload(task_id, 1, None, "x.txt", b"x", expect=400)
    assert "Amc-Lease-Id" in body["detail"]
    assert amc.acme.artifacts(task_id) == []


@req("ARTIFACT/s5")
def test_over_a_limit_is_413_naming_it_and_nothing_is_stored(make_amc):
    amc = make_amc(max_artifact_bytes=2_000_000, max_task_artifact_bytes=3_000_000)
    task_id, a = amc.claimed(start=True)
    big = amc.h1.upload(task_id, 1, a["lease_id"], "big.bin", os.urandom(2_000_001), expect=413)
    assert "2000000 bytes" in big["detail"] and "--max-artifact-bytes" in big["detail"]
    kept = amc.h1.upload(task_id, 1, a["lease_id"], "one.bin", os.urandom(2_000_000))
    over = amc.h1.upload(task_id, 1, a["lease_id"], "two.bin", os.urandom(1_000_001), expect=413)
    assert "3000000 bytes" in over["detail"] and "--max-task-artifact-bytes" in over["detail"]

    def chunked():  # no Content-Length: the limit is found while the body streams in
        for _ in range(40):
            yield b"z" * 65_536

    path = f"/v1/tasks/{task_id}/attempts/1/artifacts/stream.bin"
    amc.h1.request(
        "PUT", path, content=chunked(), params={"step": "open"}, headers={"Amc-Lease-Id": a["lease_id"]}, expect=413
    )
    assert amc.acme.artifacts(task_id) == [kept]
    blobs = amc.app.state.context.blobs
    assert list(blobs.digests()) == [kept["sha256"]]  # nothing of the refused uploads was kept
    # A retry of the stored artifact is not counted twice against the task's limit.
    assert (
        amc.h1.upload(task_id, 1, a["lease_id"], "one.bin", amc.acme.download(task_id, kept["id"]).content, expect=200)
        == kept
    )


@req("LIVENESS/s2")
def test_an_upload_shows_its_host_alive_as_every_request_of_a_host_does(amc):
    task_id, a = amc.claimed(start=True)
    now = amc.admin.advance(5)["now"]
    assert amc.acme.host("h1")["last_seen_at"] != now
    amc.h1.upload(task_id, 1, a["lease_id"], "log.txt", b"line 1\n")
    assert amc.acme.host("h1")["last_seen_at"] == now
