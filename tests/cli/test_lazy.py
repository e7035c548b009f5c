"""`amc --help` stays instant: the CLI modules import no HTTP client, UI, store or adb code."""

from __future__ import annotations

import subprocess
import sys


def test_importing_the_commands_loads_nothing_heavy():
    code = (
        "import sys, amc.cli.task, amc.cli.hosts, amc.cli.up, amc.cli.demo.command, amc.cli.app, amc.cli.client;"
        "print(sorted(m for m in ('httpx', 'rich', 'lmdb', 'starlette', 'uvicorn', 'ppadb') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_help_lists_the_commands_and_their_environment_variables():
    from click.testing import CliRunner

    from amc.cli import main

    top = CliRunner().invoke(main, ["--help"])
    for name in ("task", "up", "demo"):
        assert f"  {name} " in top.stdout
    help_text = CliRunner().invoke(main, ["task", "show", "--help"]).stdout
    assert "AMC_URL" in help_text and "AMC_TOKEN" in help_text and "AMC_DATA" in help_text
    assert "Exit codes" in CliRunner().invoke(main, ["task", "--help"]).stdout
