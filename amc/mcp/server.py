"""The MCP server of amc, on stdio (a client starts `amc mcp` itself) or on streamable HTTP."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError, UnexpectedToolError
from mcp_types import CallToolResult, InputRequiredResult
from pydantic import ValidationError

from . import errors, session_tools, task_tools
from .api import Api, Transport

INSTRUCTIONS = """\
amc controls Android phones of a shared fleet. To use a phone interactively: list_devices, then
start_session (you get a session_id and a phone reserved for you), then observe (a screenshot and
the numbered list of the screen's elements, together) and act on an element by its index [n] from
that list, or by a selector (text, text_contains, resource_id, description, class), or at x,y:
tap, double_tap, long_press, scroll, type, wait_for, back, home, press_key, swipe, launch_app,
shell; observe again to see the result. One action at a time; every action's result says how it
really ended (completed, failed, interrupted, refused or not_started, with a reason) and which
element it acted on. Call end_session when done. To run a fixed sequence of steps without
watching, submit_plan and follow it with task_status. cancel_task, pause_task and resume_task
work on both. Evidence (screenshots, UI dumps, logs) is kept: list_artifacts and get_artifact
read it."""


class AmcServer(MCPServer):
    """The SDK's server, with argument errors told as one sentence a model can act on.

    The SDK reports arguments that fail a tool's input schema as pydantic's dump (several lines,
    type codes, a documentation URL) and silently drops arguments the tool does not have; here both
    become one sentence naming the argument. A tool's own `ToolError` reaches the model as the tool
    wrote it, without the SDK's "Error executing tool ..." prefix.
    """

    async def call_tool(
        self, name: str, arguments: dict[str, Any], context: Context[Any, Any] | None = None
    ) -> CallToolResult | InputRequiredResult:
        known = await self._argument_names(name)
        if known is not None and (unknown := set(arguments) - known):
            raise errors.unknown_arguments(name, unknown, known)
        try:
            return await super().call_tool(name, arguments, context)
        except UnexpectedToolError:
            raise
        except ToolError as failure:
            cause = failure.__cause__
            if isinstance(cause, ValidationError):
                raise errors.argument_error(name, cause) from cause
            if isinstance(cause, ToolError) and not isinstance(cause, UnexpectedToolError):
                raise ToolError(str(cause)) from cause
            raise

    async def _argument_names(self, tool: str) -> set[str] | None:
        for listed in await self.list_tools():
            if listed.name == tool:
                return set((listed.input_schema or {}).get("properties") or {})
        return None


def build(transport: Transport) -> MCPServer:
    """The MCP server with every tool, talking to the control plane through `transport`."""
    server = AmcServer(name="amc", instructions=INSTRUCTIONS, log_level="WARNING")
    api = Api(transport)
    session_tools.register(server, api)
    task_tools.register(server, api)
    return server


def run_stdio(server: MCPServer) -> None:
    server.run("stdio")


def run_http(server: MCPServer, host: str, port: int, on_listening: Callable[[str], None]) -> None:
    """Serve streamable HTTP at http://HOST:PORT/mcp until interrupted; `on_listening` gets that URL
    once the socket listens (with port 0, the port the system chose)."""
    import socket

    import anyio
    import uvicorn

    listener = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind((host, port))
    listener.listen(128)
    bound = listener.getsockname()[1]
    app = server.streamable_http_app(host=host)
    config = uvicorn.Config(app, log_level="warning")

    async def serve() -> None:
        on_listening(f"http://{host}:{bound}/mcp")
        await uvicorn.Server(config).serve(sockets=[listener])

    anyio.run(serve)
