"""The MCP server of amc, on stdio (a client starts `amc mcp` itself) or on streamable HTTP."""

from __future__ import annotations

from collections.abc import Callable

from mcp.server.mcpserver import MCPServer

from . import session_tools, task_tools
from .api import Api, Transport

INSTRUCTIONS = """\
amc controls Android phones of a shared fleet. To use a phone interactively: list_devices, then
start_session (you get a session_id and a phone reserved for you), then look with screenshot or
ui_tree and act with tap_element, tap, swipe, type_text, press_key, launch_app or shell, one
action at a time; every action's result says how it really ended (completed, failed,
interrupted, refused or not_started, with a reason). Call end_session when done. To run a fixed
sequence of steps without watching, submit_plan and follow it with task_status. cancel_task,
pause_task and resume_task work on both. Evidence (screenshots, UI dumps, logs) is kept:
list_artifacts and get_artifact read it."""


def build(transport: Transport) -> MCPServer:
    """The MCP server with every tool, talking to the control plane through `transport`."""
    server: MCPServer = MCPServer(name="amc", instructions=INSTRUCTIONS, log_level="WARNING")
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
