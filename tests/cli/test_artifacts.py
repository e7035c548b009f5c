"""`amc task artifacts`, `amc task artifacts --download`, `amc task logs` and the artifacts
under each step of `amc task show`, against a real server on a socket (specs/protocol.md
Part C). The sha256 mismatch runs against `amc serve` on a data directory whose blob file
was damaged on disk."""

from __future__ import annotations

import hashlib
import json

import pytest

from amc.adapters.lmdb.blobs import FileBlobStore
from amc.cli.app import Exit
from tests.cli.test_task import submit
from tests.support.plans import TWO_STEPS
from tests.support.served import Served

PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 800  # 200 KiB and a little
LONG_OUTPUT = "".join(f"line {n}: {'x' * 60}\n" for n in range(3000))  # 210 KiB, past the inline limit
TAIL = LONG_OUTPUT[-1000:]


def run_with_evidence(cli, host) -> tuple[dict, dict]:
    """A task whose step `open` stored its full output as text and step `look` a PNG; it ended done."""
    task = submit(cli, TWO_STEPS)
    lease = host.dispatch()
    upload = host.caller.upload
    output = upload(task["id"], 1, lease["lease_id"], "open-output.txt", LONG_OUTPUT.encode(), "open", "text/plain")
    png = upload(task["id"], 1, lease["lease_id"], "look.png", PNG, "look", "image/png")
    steps = [
        {"id": "open", "status": "completed", "output": TAIL},
        {"id": "look", "status": "completed", "output": "saved look.png"},
    ]
    host.caller.report(task["id"], 1, lease["lease_id"], "done", steps=steps)
    return task, {"output": output, "png": png}


def test_the_artifacts_table_lists_step_name_type_size_and_time(cli, host):
    task, _ = run_with_evidence(cli, host)
    result = cli("task", "artifacts", task["id"], env={"COLUMNS": "80"})
    assert result.exit_code == 0, result.stderr
    lines = result.stdout.splitlines()
    assert max(len(line.rstrip()) for line in lines) <= 80, result.stdout
    assert lines[0].split() == ["STEP", "TYPE", "SIZE", "STORED", "NAME"]
    [output_row] = [line for line in lines if "open-output.txt" in line]
    [png_row] = [line for line in lines if "look.png" in line]
    assert output_row.split()[:4] == ["open", "text/plain", "209.9", "KiB"]
    assert png_row.split()[:4] == ["look", "image/png", "200.0", "KiB"]
    assert "2 artifact(s), 409.9 KiB" in result.stderr and "--download DIR" in result.stderr

    listing = json.loads(cli("task", "artifacts", task["id"], "--json").stdout)
    assert [a["name"] for a in listing["artifacts"]] == ["open-output.txt", "look.png"]


def test_a_task_without_artifacts_says_so(cli):
    task = submit(cli, TWO_STEPS)
    result = cli("task", "artifacts", task["id"])
    assert result.exit_code == 0 and f"{task['id']} has no artifacts." in result.stdout


def test_an_unknown_task_is_exit_5(cli):
    assert cli("task", "artifacts", "t_nope").exit_code == Exit.NOT_FOUND
    assert cli("task", "logs", "t_nope").exit_code == Exit.NOT_FOUND


def test_download_writes_every_file_byte_for_byte_and_a_second_run_keeps_them(cli, host, tmp_path):
    task, _ = run_with_evidence(cli, host)
    target = tmp_path / "evidence" / "new"
    result = cli("task", "artifacts", task["id"], "--download", str(target))
    assert result.exit_code == 0, result.stderr
    assert (target / "attempt-1" / "look.png").read_bytes() == PNG
    assert (target / "attempt-1" / "open-output.txt").read_text() == LONG_OUTPUT
    assert sorted(p.name for p in (target / "attempt-1").iterdir()) == ["look.png", "open-output.txt"]  # no .part
    assert "2 artifact(s) downloaded" in result.stdout

    again = cli("task", "artifacts", task["id"], "--download", str(target), "--json")
    assert again.exit_code == 0, again.stderr
    assert [a["outcome"] for a in json.loads(again.stdout)["artifacts"]] == ["unchanged", "unchanged"]


def test_download_refuses_to_replace_a_file_with_other_bytes_unless_asked(cli, host, tmp_path):
    task, _ = run_with_evidence(cli, host)
    mine = tmp_path / "attempt-1" / "look.png"
    mine.parent.mkdir()
    mine.write_bytes(b"my own notes")
    result = cli("task", "artifacts", task["id"], "--download", str(tmp_path))
    assert result.exit_code == Exit.FAILED
    assert "look.png" in result.stderr and "--overwrite" in result.stderr and "nothing was downloaded" in result.stderr
    assert mine.read_bytes() == b"my own notes" and not (tmp_path / "attempt-1" / "open-output.txt").exists()

    forced = cli("task", "artifacts", task["id"], "--download", str(tmp_path), "--overwrite")
    assert forced.exit_code == 0, forced.stderr
    assert mine.read_bytes() == PNG


def test_show_lists_each_steps_artifacts_under_it(cli, host):
    task, _ = run_with_evidence(cli, host)
    result = cli("task", "show", task["id"], env={"COLUMNS": "80"})
    assert result.exit_code == 0, result.stderr
    lines = result.stdout.splitlines()
    assert max(len(line.rstrip()) for line in lines) <= 80, result.stdout
    look = next(i for i, line in enumerate(lines) if line.startswith("look "))
    assert "look.png (image/png, 200.0 KiB)" in lines[look]
    opened = next(i for i, line in enumerate(lines) if line.startswith("open "))
    assert "open-output.txt (text/plain, 209.9 KiB)" in lines[opened]


def test_logs_print_the_full_output_from_the_text_artifact_and_the_inline_output_otherwise(cli, host):
    task, _ = run_with_evidence(cli, host)
    result = cli("task", "logs", task["id"])
    assert result.exit_code == 0, result.stderr
    text = result.stdout
    assert "== open (completed)" in text and "== look (completed)" in text
    assert LONG_OUTPUT in text  # in full, not the inline tail alone
    assert text.count(TAIL) == 1  # and the tail is not printed a second time
    assert "saved look.png" in text  # no text artifact: the inline output
    assert "look.png (image/png, 200.0 KiB): amc task artifacts" in text

    steps = json.loads(cli("task", "logs", task["id"], "--json").stdout)["steps"]
    assert [s["id"] for s in steps] == ["open", "look"]
    assert steps[0]["output"] == LONG_OUTPUT and steps[1]["output"] == "saved look.png"
    assert steps[1]["output_from"] == "inline" and len(steps[1]["artifacts"]) == 1


def test_logs_of_a_running_task_show_what_its_steps_stored_so_far(cli, host):
    task = submit(cli, TWO_STEPS)
    lease = host.dispatch()
    host.caller.upload(
        task["id"], 1, lease["lease_id"], "open-logcat.txt", b"I ActivityManager: Start proc\n", "open", "text/plain"
    )
    result = cli("task", "logs", task["id"])
    assert result.exit_code == 0, result.stderr
    assert "== open (running)" in result.stdout and "I ActivityManager: Start proc" in result.stdout


# -- against `amc serve` on a data directory --------------------------------------------------

TOKENS = [
    {"token": "cli-artifacts-client-0000", "role": "client", "tenant": "acme"},
    {"token": "cli-artifacts-host-h1-000", "role": "host", "host_id": "h1"},
]
CLIENT, HOST = (entry["token"] for entry in TOKENS)


@pytest.fixture
def served(tmp_path):
    tokens = tmp_path / "tokens.json"
    tokens.write_text(json.dumps(TOKENS))
    running = Served(tmp_path / "data", tokens=tokens)
    yield running
    running.stop()


def test_download_names_an_artifact_whose_bytes_do_not_match_its_sha256_and_keeps_the_others(cli, served, tmp_path):
    client, host = served.caller(CLIENT), served.caller(HOST)
    task = client.submit(TWO_STEPS)
    host.register("h1", ["dev-1"])
    lease = host.claim("h1")
    host.start(task["id"], 1, lease["lease_id"])
    good = host.upload(task["id"], 1, lease["lease_id"], "open-output.txt", b"all fine\n", "open", "text/plain")
    bad = host.upload(task["id"], 1, lease["lease_id"], "look.png", PNG, "look", "image/png")
    blob = FileBlobStore.in_data_dir(tmp_path / "data").path_of(bad["sha256"])
    damaged = bytearray(blob.read_bytes())
    damaged[1000] ^= 0xFF  # one flipped byte on disk, the size unchanged
    blob.write_bytes(bytes(damaged))

    target = tmp_path / "down"
    result = cli("task", "artifacts", task["id"], "--download", str(target), url=served.url, token=CLIENT)
    assert result.exit_code == Exit.FAILED
    assert "look.png (sha256 mismatch: expected " + bad["sha256"] in result.stderr
    assert hashlib.sha256(bytes(damaged)).hexdigest() in result.stderr
    assert not (target / "attempt-1" / "look.png").exists()  # nothing kept of the bad bytes
    assert not list((target / "attempt-1").glob(".*.part"))
    assert (target / "attempt-1" / "open-output.txt").read_bytes() == b"all fine\n"
    assert good["sha256"] == hashlib.sha256(b"all fine\n").hexdigest()


def test_download_names_an_artifact_whose_bytes_are_gone_from_the_server_and_keeps_the_others(cli, served, tmp_path):
    client, host = served.caller(CLIENT), served.caller(HOST)
    task = client.submit(TWO_STEPS)
    host.register("h1", ["dev-1"])
    lease = host.claim("h1")
    host.start(task["id"], 1, lease["lease_id"])
    host.upload(task["id"], 1, lease["lease_id"], "open-output.txt", b"all fine\n", "open", "text/plain; charset=utf-8")
    gone = host.upload(task["id"], 1, lease["lease_id"], "look.png", PNG, "look", "image/png")
    FileBlobStore.in_data_dir(tmp_path / "data").path_of(gone["sha256"]).unlink()

    result = cli("task", "artifacts", task["id"], "--download", str(tmp_path / "down"), url=served.url, token=CLIENT)
    assert result.exit_code == Exit.FAILED
    assert "look.png (the bytes of artifact" in result.stderr and "are missing" in result.stderr
    assert (tmp_path / "down" / "attempt-1" / "open-output.txt").read_bytes() == b"all fine\n"
    logs = cli("task", "logs", task["id"], url=served.url, token=CLIENT)
    assert "all fine" in logs.stdout  # a text/plain with a charset is a text artifact too
