"""`amc tokens` and the tokens file: add, list, revoke, a server that follows the file without
a restart, and the CLI that finds the local server on its own (whatever its port)."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import threading

import httpx
import pytest
from click.testing import CliRunner

from amc.adapters.http import tokens_file
from amc.adapters.http.auth import TokenFile, TokenFileError
from amc.cli import main
from tests.support.served import Served
from tests.support.waiting import eventually


def amc(*args: str, env: dict | None = None):
    return CliRunner().invoke(main, list(args), env=env, catch_exceptions=False)


def test_add_prints_the_token_once_and_list_never_shows_it(tmp_path):
    data = tmp_path / "data"
    added = amc("tokens", "add", "--role", "client", "--tenant", "acme", "--data", str(data))
    assert added.exit_code == 0, added.output
    token = added.stdout.strip()
    assert len(token) >= 40
    path = data / "tokens.json"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert json.loads(path.read_text()) == [{"token": token, "role": "client", "tenant": "acme"}]

    amc("tokens", "add", "--role", "host", "--host-id", "lab-1", "--data", str(data))
    amc("tokens", "add", "--role", "admin", "--data", str(data))
    listed = amc("tokens", "list", "--data", str(data), "--json")
    rows = json.loads(listed.stdout)["tokens"]
    assert [(r["role"], r.get("tenant"), r.get("host_id")) for r in rows] == [
        ("client", "acme", None),
        ("host", None, "lab-1"),
        ("admin", None, None),
    ]
    assert rows[0]["id"] == tokens_file.token_id(token)
    table = amc("tokens", "list", "--data", str(data))
    for entry in json.loads(path.read_text()):
        assert entry["token"] not in listed.stdout + table.stdout
    assert "tenant acme" in table.stdout and "host lab-1" in table.stdout


def test_revoke_by_id_prefix(tmp_path):
    data = tmp_path / "data"
    first = amc("tokens", "add", "--role", "admin", "--data", str(data), "--json")
    second = amc("tokens", "add", "--role", "admin", "--data", str(data), "--json")
    gone_id = json.loads(first.stdout)["id"]
    revoked = amc("tokens", "revoke", gone_id[:6], "--data", str(data))
    assert revoked.exit_code == 0, revoked.output
    assert [e["token"] for e in json.loads((data / "tokens.json").read_text())] == [json.loads(second.stdout)["token"]]
    missing = amc("tokens", "revoke", gone_id, "--data", str(data))
    assert missing.exit_code == 5 and "no token with an id starting" in missing.output
    too_short = amc("tokens", "revoke", "ab", "--data", str(data))
    assert too_short.exit_code == 1 and "at least 4 digits" in too_short.output


@pytest.mark.parametrize(
    "args, complaint",
    [
        (["--role", "client"], "--role client needs --tenant"),
        (["--role", "host"], "--role host needs --host-id"),
        (["--role", "admin", "--tenant", "acme"], "--role admin takes no --tenant"),
        (["--role", "client", "--tenant", "a", "--host-id", "h"], "--role client takes no --host-id"),
    ],
)
def test_add_refuses_a_token_without_its_scope(tmp_path, args, complaint):
    result = amc("tokens", "add", *args, "--data", str(tmp_path))
    assert result.exit_code == 2 and complaint in result.output
    assert not (tmp_path / "tokens.json").exists()


def test_a_broken_file_is_never_rewritten(tmp_path):
    path = tmp_path / "tokens.json"
    path.write_text('[{"token": "x", "role": "nobody"}]')
    result = amc("tokens", "add", "--role", "admin", "--tokens", str(path))
    assert result.exit_code == 1 and "role must be one of" in result.output
    assert path.read_text() == '[{"token": "x", "role": "nobody"}]'


def test_concurrent_adds_all_land(tmp_path):
    path = tmp_path / "tokens.json"
    threads = [
        threading.Thread(target=tokens_file.add, args=(path, "host"), kwargs={"host_id": f"h{i}"}) for i in range(16)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(e["host_id"] for e in tokens_file.read(path)) == sorted(f"h{i}" for i in range(16))


def test_token_file_follows_changes_and_keeps_the_last_good_table(tmp_path):
    path = tmp_path / "tokens.json"
    admin = tokens_file.add(path, "admin")
    now = [0.0]
    watched = TokenFile(path, recheck=1.0, clock=lambda: now[0])
    client = tokens_file.add(path, "client", tenant="acme")
    # An unknown token makes the file be looked at at once: a token just added is never
    # refused (`amc tokens add` then at once `amc host run`, as the README does).
    assert watched.authenticate(f"Bearer {client['token']}").tenant == "acme"
    assert watched.authenticate("Bearer tok-nobody-has-this") is None
    good = path.read_text()
    path.write_text("[not json")
    now[0] = 2.0
    assert watched.authenticate(f"Bearer {admin['token']}").role == "admin"  # the broken file is not applied
    path.write_text(good)
    tokens_file.revoke(path, tokens_file.token_id(admin["token"]))
    now[0] = 3.0
    assert watched.authenticate(f"Bearer {admin['token']}") is None
    with pytest.raises(TokenFileError):
        TokenFile(tmp_path / "missing.json")


@pytest.fixture
def served(tmp_path):
    server = Served(tmp_path / "data")
    yield server
    if server.process.poll() is None:
        server.process.kill()
        server.process.wait()


def _status(url: str, token: str) -> int:
    return httpx.get(f"{url}/v1/hosts", headers={"Authorization": f"Bearer {token}"}).status_code


def test_the_server_follows_the_tokens_file_without_a_restart(served, tmp_path):
    data = tmp_path / "data"
    added = json.loads(amc("tokens", "add", "--role", "client", "--tenant", "t2", "--data", str(data), "--json").stdout)
    eventually(lambda: _status(served.url, added["token"]) == 200, timeout=10, what="the new token accepted")
    amc("tokens", "revoke", added["id"], "--data", str(data))
    eventually(lambda: _status(served.url, added["token"]) == 401, timeout=10, what="the revoked token refused")


def test_the_cli_finds_the_local_server_on_any_port(served, tmp_path):
    data = tmp_path / "data"
    record = json.loads((data / "server.json").read_text())
    assert record == {"url": served.url, "pid": served.process.pid}
    env = {"AMC_URL": None, "AMC_TOKEN": None}
    listed = amc("host", "list", "--data", str(data), "--json", env=env)
    assert listed.exit_code == 0, listed.output
    assert json.loads(listed.stdout) == {"hosts": []}

    # Another server (this one's URL, wrong token) answers 401: the error says where the right one is.
    other = tmp_path / "other"
    tokens_file.add(other / "tokens.json", "client", tenant="x")
    (other / "server.json").write_text(json.dumps({"url": "http://127.0.0.1:9", "pid": os.getpid()}))
    refused = amc("host", "list", "--data", str(other), "--url", served.url, env=env)
    assert refused.exit_code == 4
    assert f"that is not the server of {other}, which runs at http://127.0.0.1:9" in refused.output

    served.stop()
    assert not (data / "server.json").exists()
    gone = amc("host", "list", "--data", str(data), env=env)
    assert gone.exit_code == 3 and "is `amc up` (or `amc serve`) running?" in gone.output


def test_a_stale_server_record_is_ignored(tmp_path):
    from amc.cli.client import local_url

    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    (tmp_path / "server.json").write_text(json.dumps({"url": "http://127.0.0.1:1234", "pid": dead.pid}))
    assert local_url(tmp_path) is None
    (tmp_path / "server.json").write_text(json.dumps({"url": "http://127.0.0.1:1234", "pid": os.getpid()}))
    assert local_url(tmp_path) == "http://127.0.0.1:1234"


def test_serve_warns_when_others_can_read_the_tokens_file(tmp_path):
    data = tmp_path / "data"
    tokens_file.add(data / "tokens.json", "admin")
    (data / "tokens.json").chmod(0o644)
    server = Served(data)
    try:
        server.stop()
        assert "can be read by other users" in "".join(server.output)
    finally:
        if server.process.poll() is None:
            server.process.kill()
