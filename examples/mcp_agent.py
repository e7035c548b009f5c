"""A scripted "agent" that drives a phone through `amc mcp`, printing the transcript of its session.

    python examples/mcp_agent.py            # in a directory where `amc up` runs (it reads .amc/)
    AMC_URL=... AMC_TOKEN=... python examples/mcp_agent.py

It is what an AI agent does, with the decisions written out: it starts `amc mcp` on stdio
with the MCP SDK's client (as an MCP host such as a desktop assistant does), lists the
phones, starts a session, opens Settings, reads the screen, taps "Network & internet" by
its text, takes a screenshot and ends the session. Every tool call and its result is
printed as it happened (an image as its type and size); the README's transcript is this
script's output.
"""

from __future__ import annotations

import base64
import json
import os
import re
import sys

import anyio
from mcp import Client, StdioServerParameters


def show(name: str, arguments: dict, result) -> None:
    print(f"→ {name}({json.dumps(arguments, ensure_ascii=False)})")
    for part in result.content:
        if part.type == "text":
            print("\n".join("← " + line for line in part.text.splitlines()))
        else:
            print(f"← [{part.type}: {part.mime_type}, {len(base64.b64decode(part.data))} bytes]")
    if result.is_error:
        print("← (isError: true)")
    print()


async def main() -> int:
    env = {key: os.environ[key] for key in ("AMC_URL", "AMC_TOKEN", "AMC_DATA") if key in os.environ}
    command = StdioServerParameters(command=sys.executable, args=["-m", "amc", "mcp"], env=env)
    async with Client(command) as client:

        async def call(name: str, **arguments):
            result = await client.call_tool(name, arguments)
            show(name, arguments, result)
            return result

        await call("list_devices")
        started = await call("start_session", model="Pixel 7")
        found = re.search(r"session_id=(\S+?),", started.content[0].text)
        if found is None:
            return 1
        session = found.group(1)
        await call("launch_app", session_id=session, package="com.android.settings")
        await call("ui_tree", session_id=session)
        await call("tap_element", session_id=session, text="Network & internet")
        await call("screenshot", session_id=session)
        await call("end_session", session_id=session)
    return 0


if __name__ == "__main__":
    sys.exit(anyio.run(main))
