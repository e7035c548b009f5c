"""`amc mcp`: serve the control plane's tools to an AI agent over the Model Context Protocol.

The tools (amc.mcp) reach the control plane through `ClientTransport`, the CLI's own client:
several URLs are followed to the leader, and only requests safe to repeat are sent again
after a lost answer, exactly as for `amc task`.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from amc.cli.client import DEFAULT_URL, SERVER_FILE, ApiClient, ApiError, Refused, local_token, local_url
from amc.cli.options import data_option

if TYPE_CHECKING:
    from amc.mcp.api import Json

# A request's timeout; a long poll's (an action's outcome, up to Part D's 30 s wait_seconds)
# is its wait plus this (amc.mcp.api tells each request's wait).
REQUEST_TIMEOUT_SECONDS = 10.0


class ClientTransport(ApiClient):
    """The `amc.mcp.api.Transport` of the tools, on the CLI's client; errors become `ApiFailure`."""

    def request(
        self,
        method: str,
        path: str,
        body: Any = None,
        params: Json | None = None,
        *,
        repeatable: bool | None = None,
        wait: float = 0.0,
    ) -> tuple[int, Any]:
        from amc.mcp.api import ApiFailure

        try:
            return self._call(method, path, body, params, repeatable=repeatable, wait=wait)
        except Refused as refusal:
            raise ApiFailure(refusal.message, status=refusal.status, code=refusal.code) from None
        except ApiError as error:
            raise ApiFailure(error.message) from None

    def upload_input(self, path: Path) -> tuple[Json, bool]:
        from amc.mcp.api import ApiFailure

        try:
            return super().upload_input(path)
        except Refused as refusal:
            raise ApiFailure(refusal.message, status=refusal.status, code=refusal.code) from None
        except ApiError as error:
            raise ApiFailure(error.message) from None

    def read_bytes(self, path: str) -> tuple[str, bytes]:
        """An artifact's bytes, from the server that answered last (the tools read an artifact right
        after the JSON request that named it, so that server is the leader)."""
        import httpx

        from amc.cli.client import _no_answer, _refusal
        from amc.mcp.api import ApiFailure

        url = self.url
        try:
            response = self._http.get(url + path)
        except httpx.HTTPError as error:
            raise ApiFailure(_no_answer(url, error)) from None
        if response.status_code >= 400:
            refusal = _refusal(response)
            raise ApiFailure(refusal.message, status=refusal.status, code=refusal.code)
        return response.headers.get("content-type", "application/octet-stream"), response.content


@click.command()
@click.option(
    "--transport",
    type=click.Choice(["stdio", "http"]),
    default="stdio",
    show_default=True,
    help="stdio: the MCP client starts this command and talks on its stdin/stdout. "
    "http: serve streamable HTTP at http://HOST:PORT/mcp for clients that connect; it has no authentication of "
    "its own (whoever reaches the port acts with the token), so keep HOST a local address.",
)
@click.option("--host", default="127.0.0.1", show_default=True, help="With --transport http: the address to listen on.")
@click.option(
    "--port",
    type=click.IntRange(0, 65535),
    default=8765,
    show_default=True,
    help="With --transport http (0: any free port).",
)
@data_option("Local data directory whose tokens.json supplies the token when none is given.")
@click.option(
    "--token",
    envvar="AMC_TOKEN",
    show_envvar=True,
    help="Bearer token (client or admin) the tools act with. Default: the client token of DATA/tokens.json.",
)
@click.option(
    "--url",
    "--server",
    "url",
    envvar="AMC_URL",
    show_envvar=True,
    help="Base URL of the control plane; several, comma-separated, for servers sharing one store. Default: "
    f"the server running on DATA (DATA/{SERVER_FILE}), else {DEFAULT_URL}.",
)
def mcp(transport: str, host: str, port: int, data: Path, token: str | None, url: str | None) -> None:
    """Serve amc's tools to an AI agent over the Model Context Protocol (MCP).

    The agent can list the fleet's phones, start an interactive session on one, look at its
    screen (screenshot, UI tree), act one step at a time (tap, tap an element by its text,
    swipe, type, key, launch, shell) with each action's true outcome, and end the session;
    or submit a plan and follow, pause, resume, steer, cancel it and read its artifacts.

    An MCP client configuration runs `amc mcp` with AMC_URL and AMC_TOKEN in its environment.
    """
    try:
        from amc.mcp import server as mcp_server
    except ImportError as error:  # the MCP SDK is an extra: a server or a Host Agent does not need it
        raise click.UsageError(
            f"amc mcp needs the MCP SDK ({error}): pip install 'agentic-mobile-control[mcp]'"
        ) from None

    if not token:
        try:
            token = local_token(data)
        except ApiError as error:
            raise click.UsageError(f"no token: pass --token or set AMC_TOKEN ({error.message})") from None
    client = ClientTransport(url or local_url(data) or DEFAULT_URL, token, timeout=REQUEST_TIMEOUT_SECONDS)
    try:
        server = mcp_server.build(client)
        if transport == "stdio":
            mcp_server.run_stdio(server)
        else:
            mcp_server.run_http(
                server, host, port, lambda where: click.echo(f"amc mcp: streamable HTTP listening on {where}")
            )
    except KeyboardInterrupt:
        pass
    finally:
        client.close()
