"""`amc store gc` and `amc store verify` on the artifacts of a real `amc serve` data
directory (specs/protocol.md Part C, retention): orphans left by a crash between the file
and the commit, the dry run's figures, purging the artifacts of ended tasks, and missing or
damaged files."""

from __future__ import annotations

import hashlib
import json
import os
import time

import pytest
from click.testing import CliRunner

from amc.adapters.lmdb.blobs import FileBlobStore
from amc.cli import main
from tests.support.plans import TWO_STEPS
from tests.support.served import Served

TOKENS = [
    {"token": "store-gc-client-acme-0000", "role": "client", "tenant": "acme"},
    {"token": "store-gc-host-h1-00000000", "role": "host", "host_id": "h1"},
]
CLIENT, HOST = (entry["token"] for entry in TOKENS)
SHOT = b"\x89PNG\r\n\x1a\n" + b"s" * 5000
LOG = b"I ActivityManager: Start proc\n" * 100
ORPHAN = b"bytes an upload stored before the server died, never recorded" * 50
HOUR_AGO = time.time() - 3600


def amc(*args: str):
    return CliRunner().invoke(main, list(args), catch_exceptions=False)


@pytest.fixture
def data(tmp_path):
    return tmp_path / "data"


@pytest.fixture
def served(tmp_path, data):
    tokens = tmp_path / "tokens.json"
    tokens.write_text(json.dumps(TOKENS))
    running = Served(data, tokens=tokens)
    yield running
    if running.process.poll() is None:
        running.stop()


def task_with_evidence(served: Served) -> tuple[dict, list[dict]]:
    client, host = served.caller(CLIENT), served.caller(HOST)
    task = client.submit(TWO_STEPS)
    host.register("h1", ["dev-1"])
    lease = host.claim("h1")
    host.start(task["id"], 1, lease["lease_id"])
    stored = [
        host.upload(task["id"], 1, lease["lease_id"], "look.png", SHOT, "look", "image/png"),
        host.upload(task["id"], 1, lease["lease_id"], "open-logcat.txt", LOG, "open", "text/plain"),
    ]
    host.report(task["id"], 1, lease["lease_id"], "done")
    return task, stored


def plant_orphan(data, mtime: float) -> tuple[str, os.PathLike]:
    """What a crash between the file and the commit leaves: a whole blob that no record names."""
    blobs = FileBlobStore.in_data_dir(data)
    with blobs.begin() as writer:
        writer.write(ORPHAN)
        blob = writer.finish()
    path = blobs.path_of(blob.sha256)
    os.utime(path, (mtime, mtime))
    return blob.sha256, path


def leftover_upload(data, size: int) -> os.PathLike:
    """The temporary of an upload that never finished."""
    path = FileBlobStore.in_data_dir(data).root / "tmp" / "cut-short.part"
    path.write_bytes(b"p" * size)
    return path


@pytest.mark.req("ARTIFACT-RETAIN/s1")
def test_gc_removes_an_orphan_beside_a_running_server_but_keeps_young_files_and_the_referenced_ones(served, data):
    task, stored = task_with_evidence(served)
    orphan_sha, orphan = plant_orphan(data, HOUR_AGO)
    young = leftover_upload(data, 700)

    dry = amc("store", "gc", "--data", str(data), "--dry-run")
    assert dry.exit_code == 0, dry.output
    assert f"Would free 1 files, {len(ORPHAN) / 1024:.1f} KiB ({len(ORPHAN)} bytes)" in dry.stdout
    assert "1 unreferenced, 0 unfinished uploads" in dry.stdout
    assert "files younger than 10 minutes were kept" in dry.stderr
    assert orphan.exists()  # a dry run removes nothing

    done = amc("store", "gc", "--data", str(data))
    assert done.exit_code == 0, done.output
    assert f"Freed 1 files, {len(ORPHAN) / 1024:.1f} KiB" in done.stdout
    assert not orphan.exists() and young.exists()  # the young temporary may be an upload in flight
    for artifact in stored:  # what records name is never touched
        assert served.caller(CLIENT).download(task["id"], artifact["id"]).content in (SHOT, LOG)
    assert orphan_sha not in {a["sha256"] for a in stored}

    refused = amc("store", "gc", "--data", str(data), "--older-than", "0s")
    assert refused.exit_code == 3
    assert "stop the server first" in refused.stderr and "already open for writing" in refused.stderr


@pytest.mark.req("ARTIFACT-RETAIN/s1", "ARTIFACT-RETAIN/s2")
def test_gc_older_than_purges_the_artifacts_of_ended_tasks_with_the_server_stopped(served, data):
    task, stored = task_with_evidence(served)
    _, orphan = plant_orphan(data, time.time())  # young, but no server runs when gc does
    leftover = leftover_upload(data, 300)
    served.stop()

    kept = amc("store", "gc", "--data", str(data), "--older-than", "1d", "--dry-run")
    assert kept.exit_code == 0, kept.output
    young = len(ORPHAN) + 300
    assert f"Would free 2 files, {young / 1024:.1f} KiB ({young} bytes) (1 unreferenced, 1 unfinished" in kept.stdout
    assert "would purge 0 artifacts of 0 ended tasks" in kept.stdout

    dry = amc("store", "gc", "--data", str(data), "--older-than", "0s", "--dry-run")
    total = len(SHOT) + len(LOG) + len(ORPHAN) + 300
    assert (
        f"Would free 4 files, {total / 1024:.1f} KiB ({total} bytes) (3 unreferenced, 1 unfinished uploads)"
        in dry.stdout
    )
    assert "would purge 2 artifacts of 1 ended tasks" in dry.stdout
    blobs = FileBlobStore.in_data_dir(data)
    assert all(blobs.path_of(a["sha256"]).exists() for a in stored) and orphan.exists() and leftover.exists()

    purged = amc("store", "gc", "--data", str(data), "--older-than", "0s")
    assert purged.exit_code == 0, purged.output
    assert f"Freed 4 files, {total / 1024:.1f} KiB ({total} bytes)" in purged.stdout
    assert "purged 2 artifacts of 1 ended tasks" in purged.stdout
    assert not any(blobs.path_of(a["sha256"]).exists() for a in stored) and not orphan.exists()
    assert not leftover.exists()
    assert amc("store", "verify", "--data", str(data)).exit_code == 0

    again = Served(data, tokens=data.parent / "tokens.json")
    try:
        client = again.caller(CLIENT)
        assert client.artifacts(task["id"]) == []
        client.download(task["id"], stored[0]["id"], expect=404)
        [event] = [e for e in client.history(task["id"]) if e["type"] == "artifacts_purged"]
        assert event["data"] == {"ids": [a["id"] for a in stored], "bytes": len(SHOT) + len(LOG)}
        assert client.task(task["id"])["status"] == "done"  # the task itself stays
        env = {"AMC_URL": again.url, "AMC_TOKEN": CLIENT}
        said = CliRunner().invoke(main, ["task", "artifacts", task["id"]], env=env, catch_exceptions=False)
        assert said.exit_code == 0 and f"{task['id']} has no artifacts: 2 were purged at " in said.stdout
    finally:
        again.stop()


@pytest.mark.req("ARTIFACT-RETAIN/s3")
def test_verify_names_an_artifact_whose_file_is_missing_or_damaged(served, data):
    task, stored = task_with_evidence(served)
    ok = amc("store", "verify", "--data", str(data))
    assert ok.exit_code == 0, ok.output
    assert "2 artifacts in 2 files" in ok.stdout and "every artifact file is there with its sha256" in ok.stdout

    blobs = FileBlobStore.in_data_dir(data)
    shot, log = stored
    blobs.path_of(shot["sha256"]).unlink()
    blobs.path_of(log["sha256"]).write_bytes(LOG[:-1] + b"!")
    bad = amc("store", "verify", "--data", str(data))
    assert bad.exit_code == 1
    assert f"artifact {task['id']}/{shot['id']} (look.png): missing" in bad.stdout
    damaged = hashlib.sha256(LOG[:-1] + b"!").hexdigest()
    assert f"artifact {task['id']}/{log['id']} (open-logcat.txt): corrupt" in bad.stdout and damaged in bad.stdout


def test_gc_and_verify_refuse_a_directory_without_a_store(tmp_path):
    for command in ("gc", "verify"):
        result = amc("store", command, "--data", str(tmp_path / "nothing"))
        assert result.exit_code == 2 and "holds no amc store" in result.stderr
    assert not (tmp_path / "nothing").exists()  # nothing was made


def test_a_duration_that_is_not_one_is_a_usage_error(tmp_path):
    result = amc("store", "gc", "--data", str(tmp_path), "--older-than", "soon")
    assert result.exit_code == 2 and "not a duration" in result.stderr
