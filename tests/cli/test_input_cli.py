"""`amc input upload`, `amc input list`, and `amc task submit`'s "@path" (specs/protocol.md Part F),
against a real `amc serve`."""

from __future__ import annotations

import hashlib
import json

import pytest
from click.testing import CliRunner

from amc.cli import main
from tests.support.served import Served

TOKENS = [{"token": "input-cli-client-acme-0000", "role": "client", "tenant": "acme"}]


@pytest.fixture
def served(tmp_path):
    tokens = tmp_path / "tokens.json"
    tokens.write_text(json.dumps(TOKENS))
    running = Served(tmp_path / "data", tokens=tokens)
    yield running
    running.stop()


def amc(served, *args: str):
    env = {"AMC_URL": served.url, "AMC_TOKEN": TOKENS[0]["token"]}
    return CliRunner().invoke(main, list(args), env=env, catch_exceptions=False)


@pytest.mark.req("UPLOAD/s1", "UPLOAD/s8")
def test_upload_prints_the_reference_and_submit_uploads_at_paths_first(served, tmp_path):
    app = tmp_path / "app.apk"
    app.write_bytes(b"PK\x03\x04 not really an apk" * 1000)
    digest = hashlib.sha256(app.read_bytes()).hexdigest()
    said = amc(served, "input", "upload", str(app))
    assert said.exit_code == 0 and said.stdout.strip() == f"sha256:{digest}", said.output
    listed = amc(served, "input", "list", "--json")
    assert [i["sha256"] for i in json.loads(listed.stdout)["inputs"]] == [digest]

    fixture = tmp_path / "plans" / "fixture.txt"
    fixture.parent.mkdir()
    fixture.write_bytes(b"a fixture to push")
    plan = tmp_path / "plans" / "plan.json"
    push = {"input": "@fixture.txt", "path": "/sdcard/fixture.txt"}
    plan.write_text(json.dumps({"steps": [{"id": "s", "action": "push", "args": push}]}))
    submitted = amc(served, "task", "submit", str(plan))
    assert submitted.exit_code == 0, submitted.output
    listed = json.loads(amc(served, "input", "list", "--json").stdout)["inputs"]
    assert hashlib.sha256(b"a fixture to push").hexdigest() in {i["sha256"] for i in listed}
