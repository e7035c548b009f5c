"""`amc mcp --transport http`: the same tools over streamable HTTP, for MCP clients that connect."""

from __future__ import annotations

import re
import subprocess
import sys

import anyio
import pytest
from mcp import Client


@pytest.mark.slow
def test_a_client_lists_the_tools_and_calls_one_over_streamable_http(stack):
    env = {"AMC_URL": stack.url, "AMC_TOKEN": stack.token, "PATH": ""}
    process = subprocess.Popen(
        [sys.executable, "-m", "amc", "mcp", "--transport", "http", "--port", "0"],
        env=env,
        text=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        line = process.stdout.readline()
        found = re.search(r"listening on (http://\S+/mcp)", line)
        assert found, line + process.stderr.read()

        async def run():
            async with Client(found.group(1)) as client:
                names = {tool.name for tool in (await client.list_tools()).tools}
                devices = await client.call_tool("list_devices", {})
                return names, devices

        names, devices = anyio.run(run)
        assert {"start_session", "observe", "tap", "submit_plan", "cancel_task"} <= names
        assert not devices.is_error and "amc-sim-01" in devices.content[0].text
    finally:
        process.terminate()
        process.wait(15)
