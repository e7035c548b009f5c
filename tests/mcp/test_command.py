"""`amc mcp` as a command: its options, and what it says when it cannot start."""

from __future__ import annotations

import subprocess
import sys

from click.testing import CliRunner

from amc.cli import main


def test_amc_lists_mcp_and_its_help_names_the_environment_and_the_transports():
    assert "  mcp " in CliRunner().invoke(main, ["--help"]).stdout
    help_text = CliRunner().invoke(main, ["mcp", "--help"]).stdout
    for word in ("AMC_URL", "AMC_TOKEN", "--transport", "stdio|http", "--port"):
        assert word in help_text


def test_without_a_token_it_says_where_one_comes_from_and_exits_with_usage(tmp_path):
    env = {"AMC_TOKEN": None, "AMC_URL": None, "AMC_DATA": None}
    result = CliRunner().invoke(main, ["mcp", "--data", str(tmp_path / "nothing")], env=env)
    assert result.exit_code == 2
    assert "no token: pass --token or set AMC_TOKEN" in result.output


def test_importing_the_command_loads_neither_the_sdk_nor_an_http_client():
    code = (
        "import sys, amc.cli.mcp; print(sorted(m for m in ('mcp', 'pydantic', 'httpx', 'uvicorn') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
