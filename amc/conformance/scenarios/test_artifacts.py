"""Artifacts, specs/protocol.md Part C (specs/requirements/artifacts.md): the evidence of
what a step did, uploaded by the owning host and read by whoever may read the task.

The test plays the Host Agent that uploads and the clients that read. The limits checked
are the protocol's defaults (one artifact at most 16 MiB); a server run with other limits
answers the over-limit scenario differently.
"""

from __future__ import annotations

import hashlib
import os

import pytest

from amc.conformance.client import download_artifact, list_artifacts, plan_of, upload_artifact

MiB = 1024 * 1024
DEFAULT_MAX_ARTIFACT_BYTES = 16 * MiB
MEMBERS = {"id", "task_id", "attempt", "step", "name", "content_type", "size", "sha256", "created_at"}


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@pytest.mark.req("ARTIFACT/s1", "ARTIFACT/s7")
def test_an_upload_reads_back_byte_for_byte_with_its_sha256(scene):
    acme, h1 = scene.acme, scene.h1
    task, lease = scene.running(h1, plan=plan_of("a", "b"))
    png = os.urandom(200_000)
    stored = upload_artifact(h1.caller, lease, "screen.png", png, step="b", content_type="image/png")
    assert set(stored) == MEMBERS, stored
    assert (stored["task_id"], stored["attempt"], stored["step"], stored["name"]) == (task["id"], 1, "b", "screen.png")
    assert (stored["content_type"], stored["size"], stored["sha256"]) == ("image/png", len(png), sha256(png))
    got = download_artifact(acme, task["id"], stored["id"])
    assert got.content == png
    assert got.headers["etag"] == f'"{sha256(png)}"'
    assert got.headers["content-type"].split(";")[0] == "image/png"
    # A missing Content-Type is stored as application/octet-stream.
    plain = upload_artifact(h1.caller, lease, "dump.bin", b"\x00\x01", step="a", content_type=None)
    assert plain["content_type"] == "application/octet-stream"
    assert list_artifacts(acme, task["id"]) == [stored, plain]
    history = [e for e in acme.history(task["id"]) if e["type"] == "artifact_stored"]
    assert [e["data"] for e in history] == [
        {k: a[k] for k in ("id", "step", "name", "size", "sha256")} for a in (stored, plain)
    ]


@pytest.mark.req("ARTIFACT/s2")
def test_a_repeated_upload_is_200_and_other_bytes_are_409(scene):
    h1 = scene.h1
    task, lease = scene.running(h1, plan=plan_of("a"))
    first = upload_artifact(h1.caller, lease, "out.txt", b"hello\n", step="a", content_type="text/plain")
    again = upload_artifact(h1.caller, lease, "out.txt", b"hello\n", step="a", content_type="text/plain", expect=200)
    assert again == first
    upload_artifact(h1.caller, lease, "out.txt", b"other\n", step="a", expect=(409, "artifact_conflict"))
    assert list_artifacts(scene.acme, task["id"]) == [first]


@pytest.mark.req("ARTIFACT/s3")
def test_stale_and_foreign_uploads_are_409_and_add_nothing(scene):
    h1, h2, clock = scene.h1, scene.h2, scene.clock
    task, first = scene.running(h1, plan=plan_of("a"), lease_seconds=5, max_attempts=2)
    h2.register(scene.device("emulator-5556"))
    upload_artifact(h2.caller, first, "x.txt", b"x", step="a", expect=(409, "lease_foreign"))
    upload_artifact(h1.caller, first, "x.txt", b"x", step="a", lease_id="l_not-this-one", expect=(409, "lease_unknown"))
    clock.run_out(first)
    upload_artifact(h1.caller, first, "x.txt", b"x", step="a", expect=(409, "lease_expired"))
    second = h1.claim()
    assert second is not None and second.attempt == 2
    upload_artifact(h1.caller, first, "x.txt", b"x", step="a", expect=(409, "lease_replaced"))
    h1.start(second)
    h1.report(second, "done")
    upload_artifact(h1.caller, second, "x.txt", b"x", step="a", expect=(409, "lease_ended"))
    assert list_artifacts(scene.acme, task["id"]) == []


@pytest.mark.req("ARTIFACT/s6")
def test_another_tenant_and_a_stranger_host_get_404(scene):
    acme, beta, h1, h2 = scene.acme, scene.beta, scene.h1, scene.h2
    task, lease = scene.running(h1, plan=plan_of("a"))
    stored = upload_artifact(h1.caller, lease, "x.txt", b"x", step="a")
    assert list_artifacts(h1.caller, task["id"]) == [stored]  # the host that ran it reads it
    assert download_artifact(scene.admin, task["id"], stored["id"]).content == b"x"
    for stranger in (beta, h2.caller):
        list_artifacts(stranger, task["id"], expect=(404, "not_found"))
        stranger.call("GET", f"/v1/tasks/{task['id']}/artifacts/{stored['id']}", expect=(404, "not_found"))
    acme.call("GET", f"/v1/tasks/{task['id']}/artifacts/a_no-such-artifact", expect=(404, "not_found"))


@pytest.mark.req("ARTIFACT/s5")
def test_an_artifact_over_the_limit_is_413_and_nothing_is_listed(scene):
    h1 = scene.h1
    task, lease = scene.running(h1, plan=plan_of("a"))
    too_big = b"z" * (DEFAULT_MAX_ARTIFACT_BYTES + 1)
    refused = upload_artifact(h1.caller, lease, "big.bin", too_big, step="a", expect=(413, "payload_too_large"))
    assert str(DEFAULT_MAX_ARTIFACT_BYTES) in refused["detail"], "the detail names the limit"
    assert list_artifacts(scene.acme, task["id"]) == []


@pytest.mark.req("ARTIFACT/s4")
@pytest.mark.parametrize("name", ["a b", "a..b", "..x", "é.txt", "x" * 129])
def test_a_bad_name_is_400(scene, name):
    h1 = scene.h1
    task, lease = scene.running(h1, plan=plan_of("a"))
    upload_artifact(h1.caller, lease, name, b"x", step="a", expect=(400, "invalid_request"))
    assert list_artifacts(scene.acme, task["id"]) == []


@pytest.mark.req("ARTIFACT/s4")
def test_an_unknown_step_is_400_naming_it(scene):
    h1 = scene.h1
    task, lease = scene.running(h1, plan=plan_of("a"))
    refused = upload_artifact(h1.caller, lease, "x.txt", b"x", step="nowhere", expect=(400, "invalid_request"))
    assert "nowhere" in refused["detail"]
    assert list_artifacts(scene.acme, task["id"]) == []


@pytest.mark.req("ARTIFACT/s9")
def test_a_step_outcome_lists_only_its_own_attempts_artifacts_of_that_step(scene):
    h1 = scene.h1
    task, lease = scene.running(h1, plan=plan_of("a", "b"))
    shot = upload_artifact(h1.caller, lease, "a.png", b"png", step="a", content_type="image/png")
    for listed in ({"b": [shot["id"]]}, {"a": ["a_not-an-artifact"]}):
        steps = [{"id": s, "status": "completed", "artifacts": listed.get(s, [])} for s in ("a", "b")]
        refused = h1.report(lease, "done", steps=steps, expect=(400, "invalid_request"))
        assert next(iter(listed.values()))[0] in refused["detail"], "the detail names the id"
    steps = [{"id": "a", "status": "completed", "artifacts": [shot["id"]]}, {"id": "b", "status": "completed"}]
    done = h1.report(lease, "done", steps=steps)
    assert done["result"]["steps"][0]["artifacts"] == [shot["id"]]
    assert "artifacts" not in done["result"]["steps"][1], "a step with none lists none"
    assert scene.acme.get_task(task["id"])["result"]["steps"] == done["result"]["steps"]
