"""A scripted "agent" that drives a phone through `amc mcp`, printing the transcript of its session.

    python examples/mcp_agent.py            # in a directory where `amc up` runs (it reads .amc/)
    AMC_URL=... AMC_TOKEN=... python examples/mcp_agent.py

It is what an AI agent does, with the decisions written out: it starts `amc mcp` on stdio
with the MCP SDK's client (as an MCP host such as a desktop assistant does), lists the
phones, starts a session, opens the simulator's example app, observes the screen (the
screenshot with numbered boxes and the indexed element list, in one result), types a name
into the field it found by its index, taps "Log in" by its text, waits for the greeting,
observes again and ends the session. Every tool call and its result is printed as it
happened (an image as its type and size); the README's transcript is this script's output.
"""

from __future__ import annotations

import base64
import json
import os
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
        if started.is_error:
            return 1
        session = started.structured_content["session_id"]
        await call("launch_app", session_id=session, package="com.example.app")
        looked = await call("observe", session_id=session, marks=True)
        # The model's decision, written out: the element list says which index is the username field.
        field = next(e for e in looked.structured_content["elements"] if e["resource_id"].endswith(":id/username"))
        await call("type", session_id=session, index=field["index"], text="ada", clear=True)
        await call("tap", session_id=session, text="Log in")
        await call("wait_for", session_id=session, text_contains="Signed in as", timeout_seconds=5)
        await call("observe", session_id=session, scale=0.3)
        await call("end_session", session_id=session)
    return 0


if __name__ == "__main__":
    sys.exit(anyio.run(main))
