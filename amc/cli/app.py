"""The application object of the caller commands: output, connection, and clean exits.

In the manner of hatch, every caller command (`amc task ...`, `amc host list`) gets one
`Application` in `ctx.obj`. It owns:

- output: `display_*` for people (rich, to stdout; errors and notes to stderr), and
  `display_json` for scripts when `--json` is given. In JSON mode stdout carries exactly one
  JSON document and nothing else, so `amc task show ID --json | jq .status` always works;
- the connection: `--url` (or `--server`)/`AMC_URL`, one URL or several separated by commas
  (the leader among them is followed, `amc.cli.client`), and `--token`/`AMC_TOKEN`, falling back to what the local
  server wrote in `--data`/`AMC_DATA`: the URL it serves on (`server.json`, while it runs)
  and the tokens file. Both are read only when a command first talks to the server, so
  `--help` never reads them;
- exits: `abort(message, code)` prints one line and exits with `code`. Every `ApiError` a
  command lets escape is turned into such a line by `caller_command`, with the exit code of
  its kind (`Exit` below), never a traceback. Under --json the line is one problem document
  instead (`{"type", "title", "status", "detail", "code"}`, the server's own when it
  answered; `status` null and a code such as `unreachable` when none did), and stdout
  stays empty.
"""

from __future__ import annotations

import enum
import functools
import json
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn, TypedDict

import click

from amc.cli.client import DEFAULT_URL, SERVER_FILE, ApiClient, ApiError, Refused, Unreachable, local_token, local_url
from amc.cli.options import data_option

if TYPE_CHECKING:
    from rich.console import Console


class Exit(enum.IntEnum):
    """The exit codes of the caller commands (also in `amc task --help`)."""

    OK = 0
    FAILED = 1  # the command ran and the answer is "no": a watched task did not end done, a demo verdict failed
    USAGE = 2  # click's own: a bad option or argument
    UNREACHABLE = 3  # no answer from the server
    UNAUTHORIZED = 4  # 401 or 403: the token is missing, unknown or not allowed to do this
    NOT_FOUND = 5  # 404
    CONFLICT = 6  # 409: the protocol's rules refuse it now (e.g. task_terminal)
    INVALID = 7  # 400 or 413: the request itself is malformed (a bad plan, a bad option value)


EXIT_HELP = (
    "Exit codes: 0 ok; 1 the answer is no (a watched task did not end done); 2 usage; "
    "3 server unreachable; 4 token refused (401/403); 5 not found (404); "
    "6 conflict (409, with its code); 7 invalid request (400/413); 130 Ctrl-C on watch (the watching stops, not the task)."
)


def make_console(stderr: bool = False) -> Console:
    """A rich console for stdout (or stderr) that also reads well in a pipe or a CI log."""
    from rich.console import Console  # rich is imported by commands only, never by --help

    # Outside a terminal rich would wrap at 80 columns; tables of ids and times read better
    # wider, and COLUMNS still wins when it is set.
    stream = sys.stderr if stderr else sys.stdout
    width = None if stream.isatty() or os.environ.get("COLUMNS") else 132
    return Console(stderr=stderr, width=width, highlight=False)


def exit_code(error: ApiError) -> Exit:
    if isinstance(error, Unreachable):
        return Exit.UNREACHABLE
    if isinstance(error, Refused):
        if error.status in (401, 403):
            return Exit.UNAUTHORIZED
        if error.status == 404:
            return Exit.NOT_FOUND
        if error.status == 409:
            return Exit.CONFLICT
        if error.status in (400, 413, 422):
            return Exit.INVALID
    return Exit.FAILED


# The problem codes of errors the CLI finds itself, with no HTTP status from a server.
LOCAL_CODES: dict[int, tuple[str, str]] = {
    Exit.FAILED: ("failed", "The answer is no"),
    Exit.USAGE: ("usage", "Usage error"),
    Exit.UNREACHABLE: ("unreachable", "Server unreachable"),
    Exit.UNAUTHORIZED: ("no_token", "No token"),
    Exit.INVALID: ("invalid_input", "Invalid input"),
}


class Problem(TypedDict):
    """A problem document, in specs/protocol.md's shape; `status` is None when no server answered."""

    type: str
    title: str
    status: int | None
    detail: str
    code: str


def local_problem(detail: str, code: int) -> Problem:
    """A problem document (specs/protocol.md's shape) for an error no server answered: `status` is null."""
    name, title = LOCAL_CODES.get(code, ("failed", "Failed"))
    return {"type": f"urn:amc:problem:{name}", "title": title, "status": None, "detail": detail, "code": name}


def problem_of(error: ApiError, hint: str = "") -> Problem:
    """The problem document of a failed call: the server's own, or one for no answer at all."""
    if isinstance(error, Refused):
        return {
            "type": f"urn:amc:problem:{error.code}",
            "title": error.title,
            "status": error.status,
            "detail": error.detail + hint,
            "code": error.code,
        }
    return local_problem(error.message + hint, exit_code(error))


class Application:
    """Output and connection for one invocation of a caller command.

    Args:
        as_json: print one JSON document to stdout instead of tables and sentences.
        url: the server's base URL; None: the local server's (`data`/server.json), else DEFAULT_URL.
        token: the bearer token; None reads the tokens file in `data` on first use.
        data: the local data directory whose server record and tokens file are the fallbacks.
    """

    def __init__(
        self, *, as_json: bool = False, url: str | None = None, token: str | None = None, data: Path = Path(".amc")
    ):
        self.as_json = as_json
        self._url = url
        self.data = data
        self._token = token
        self._client: ApiClient | None = None
        self.out = make_console()
        self.err = make_console(stderr=True)

    # -- the connection ------------------------------------------------------------------

    @property
    def url(self) -> str:
        if self._url is None:
            self._url = local_url(self.data) or DEFAULT_URL
        return self._url

    @property
    def client(self) -> ApiClient:
        if self._client is None:
            token = self._token
            if not token:
                try:
                    token = local_token(self.data)
                except ApiError as error:
                    self.abort(
                        f"no token: pass --token or set AMC_TOKEN ({error.message}; `amc up` writes one there)",
                        Exit.UNAUTHORIZED,
                    )
            self._client = ApiClient(self.url, token)
        return self._client

    def close(self) -> None:
        if self._client is not None:
            self._client.close()

    # -- output --------------------------------------------------------------------------

    def display(self, renderable: Any = "") -> None:
        """Something for people (a table, a sentence); nothing in JSON mode."""
        if not self.as_json:
            self.out.print(renderable)

    def display_json(self, data: Any) -> None:
        click.echo(json.dumps(data, indent=2, ensure_ascii=False))

    def display_result(self, data: Any, renderable: Callable[[], Any]) -> None:
        """`data` as JSON in JSON mode, else what `renderable()` builds from it, for people."""
        if self.as_json:
            self.display_json(data)
        else:
            self.out.print(renderable())

    def display_info(self, text: str) -> None:
        """A note for people, on stderr so it never mixes with a command's output."""
        if not self.as_json:
            self.err.print(text, style="dim")

    def display_error(self, text: str) -> None:
        self.err.print(f"Error: {text}", style="red", markup=False, soft_wrap=True)

    def abort(self, message: str, code: int = Exit.FAILED, *, problem: Problem | None = None) -> NoReturn:
        """Print `message` as one error line and exit with `code`.

        Under --json the error is one problem document on stderr instead (`problem`, else one
        made from `message` and `code`), so a script reads JSON from both streams and stdout
        stays empty.
        """
        if self.as_json:
            document = problem or local_problem(message, code)
            click.echo(json.dumps(document, ensure_ascii=False), err=True)
        else:
            self.display_error(message)
        raise click.exceptions.Exit(int(code))

    def fail(self, error: ApiError) -> NoReturn:
        hint = self._hint(error)
        self.abort(error.message + hint, exit_code(error), problem=problem_of(error, hint))

    def _hint(self, error: ApiError) -> str:
        """What to try next, appended to the error line where there is an obvious next step.

        A refused token is most often a token sent to the wrong server (another amc on the
        default port, say), so a 401 says where the local server of `--data` really listens.
        """
        local = local_url(self.data)
        if isinstance(error, Unreachable):
            if local is None:
                return "; is `amc up` (or `amc serve`) running? Set --url or AMC_URL"
            return f"; the server of {self.data} runs at {local}" if local != self.url else ""
        if isinstance(error, Refused) and error.status == 401:
            if self._token:
                return f" (the server at {self.url} does not know the token of --token or AMC_TOKEN)"
            if local is None:
                return (
                    f" (the server at {self.url} does not know the token of {self.data}/tokens.json, and no "
                    f"server of {self.data} is running: no {self.data}/{SERVER_FILE}; set --url or AMC_URL)"
                )
            if local != self.url:
                return (
                    f" (the server at {self.url} does not know the token of {self.data}/tokens.json: "
                    f"that is not the server of {self.data}, which runs at {local})"
                )
            return f" (the token in {self.data}/tokens.json was revoked? `amc tokens list --data {self.data}`)"
        return ""


# -- the options every caller command takes -------------------------------------------------


def caller_command(function: Callable[..., None]) -> Callable[..., None]:
    """Give a click command the connection and output options, and an `Application` as `app`.

    The application goes into `ctx.obj` as well; an `ApiError` escaping the command becomes
    one error line and its exit code.
    """

    @click.option("--json", "as_json", is_flag=True, help="Print one JSON document (for scripts) instead of tables.")
    @data_option("Local data directory whose tokens.json supplies the token when none is given.")
    @click.option(
        "--token",
        envvar="AMC_TOKEN",
        show_envvar=True,
        help="Bearer token (client or admin). Default: the client token of DATA/tokens.json. "
        "Prefer the environment variable: arguments are visible to other users.",
    )
    @click.option(
        "--url",
        "--server",
        "url",
        envvar="AMC_URL",
        show_envvar=True,
        help="Base URL of the control plane; several, comma-separated, for servers sharing one store: "
        "requests go to the leader among them. Default: the server running on DATA "
        f"(DATA/{SERVER_FILE}, written by amc up and amc serve), else {DEFAULT_URL}.",
    )
    @click.pass_context
    @functools.wraps(function)
    def wrapper(
        ctx: click.Context, /, as_json: bool, data: Path, token: str | None, url: str | None, **kwargs: Any
    ) -> None:
        app = Application(as_json=as_json, url=url, token=token, data=data)
        ctx.obj = app
        ctx.call_on_close(app.close)
        try:
            return function(app, **kwargs)
        except ApiError as error:
            app.fail(error)

    return wrapper
