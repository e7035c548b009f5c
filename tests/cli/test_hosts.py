"""`amc host list` (the `list_hosts` command) against a real server."""

from __future__ import annotations

import json

from click.testing import CliRunner

from amc.cli.app import Exit
from amc.cli.hosts import list_hosts
from tests.cli.conftest import CLIENT_TOKEN
from tests.support.plans import TWO_STEPS as PLAN


def run(server, *args: str, token: str = CLIENT_TOKEN):
    return CliRunner().invoke(
        list_hosts, list(args), env={"AMC_URL": server.url, "AMC_TOKEN": token}, catch_exceptions=False
    )


def test_no_hosts_yet(server):
    result = run(server)
    assert result.exit_code == 0 and "No hosts have registered yet" in result.stdout
    assert json.loads(run(server, "--json").stdout) == {"hosts": []}


def test_hosts_their_devices_and_what_runs_on_them(server, host, cli):
    host.register("dev-1", "dev-2")
    task = json.loads(cli("task", "submit", "-", "--json", input=json.dumps(PLAN)).stdout)
    host.dispatch("dev-2")
    people = run(server)
    assert people.exit_code == 0, people.stderr
    lines = people.stdout.splitlines()
    dev1 = next(line for line in lines if "dev-1" in line)
    dev2 = next(line for line in lines if "dev-2" in line)
    assert "h1" in dev1 and "Pixel 7" in dev1 and "yes" in dev1
    assert f"{task['id']} #1" in dev2
    hosts = json.loads(run(server, "--json").stdout)["hosts"]
    assert [(d["serial"], d["reservation"]) for d in hosts[0]["devices"]] == [
        ("dev-1", None),
        ("dev-2", {"task_id": task["id"], "attempt": 1}),
    ]


def test_a_bad_token_is_exit_4(server):
    result = run(server, token="nope")
    assert result.exit_code == Exit.UNAUTHORIZED and result.stderr.startswith("Error: ")
