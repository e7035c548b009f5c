"""`amc tokens add|list|revoke`: the tokens file, without editing JSON by hand.

Each command works on the file a server reads: `--tokens FILE`, else DATA/tokens.json. A
running `amc serve` notices the change within a second or two, with no restart. A new
token is printed once, when it is added; `list` shows ids, roles and scopes, never secrets.
"""

from __future__ import annotations

import json
from pathlib import Path

import click

from amc.cli.app import Exit
from amc.cli.options import F, data_option


def _file_options(function: F) -> F:
    function = click.option(
        "--tokens",
        "tokens_file",
        type=click.Path(dir_okay=False, path_type=Path),
        envvar="AMC_TOKENS",
        show_envvar=True,
        help="The tokens file. Default: DATA/tokens.json.",
    )(function)
    return data_option("Data directory of the server whose tokens these are.")(function)


def _path(data: Path, tokens_file: Path | None) -> Path:
    from amc.cli.client import TOKENS_FILE

    return tokens_file or data / TOKENS_FILE


def _fail(message: str, code: Exit = Exit.FAILED) -> click.exceptions.Exit:
    click.echo(f"Error: {message}", err=True)
    return click.exceptions.Exit(int(code))


@click.group()
def tokens() -> None:
    """Add, list and revoke the tokens a server accepts (no restart needed)."""


@tokens.command()
@click.option(
    "--role",
    type=click.Choice(["client", "host", "admin"]),
    required=True,
    help="client: submits and reads its tenant's tasks; host: runs a Host Agent; admin: everything.",
)
@click.option("--tenant", help="The tenant of a client token (required with --role client).")
@click.option("--host-id", help="The host a host token stands for (required with --role host).")
@click.option("--json", "as_json", is_flag=True, help="Print the new entry as one JSON document.")
@_file_options
def add(
    role: str, tenant: str | None, host_id: str | None, as_json: bool, data: Path, tokens_file: Path | None
) -> None:
    """Add a token and print it, once: it is not shown again.

    \b
    amc tokens add --role client --tenant acme
    amc tokens add --role host --host-id lab-1
    amc tokens add --role admin
    """
    from amc.adapters.http import tokens_file as tokens_files
    from amc.adapters.http.auth import TokenFileError

    needs = {"client": ("--tenant", tenant), "host": ("--host-id", host_id)}.get(role)
    if needs is not None and not needs[1]:
        raise click.UsageError(f"--role {role} needs {needs[0]}")
    extra = [
        flag
        for flag, value, wanted in (("--tenant", tenant, "client"), ("--host-id", host_id, "host"))
        if value is not None and role != wanted
    ]
    if extra:
        raise click.UsageError(f"--role {role} takes no {' or '.join(extra)}")
    path = _path(data, tokens_file)
    try:
        entry = tokens_files.add(path, role, tenant=tenant, host_id=host_id)
    except TokenFileError as error:
        raise _fail(str(error)) from None
    described = tokens_files.describe(entry)
    if as_json:
        click.echo(json.dumps({**described, "token": entry["token"], "file": str(path)}, indent=2))
        return
    scope = f" of tenant {tenant!r}" if tenant else f" for host {host_id!r}" if host_id else ""
    article = "an" if role == "admin" else "a"
    click.echo(
        f"Added {article} {role} token{scope} to {path} (id {described['id']}). It is shown only this once:", err=True
    )
    click.echo(entry["token"])


@tokens.command(name="list")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document.")
@_file_options
def list_tokens(as_json: bool, data: Path, tokens_file: Path | None) -> None:
    """List the tokens by id, role and scope (never the tokens themselves)."""
    from amc.adapters.http import tokens_file as tokens_files
    from amc.adapters.http.auth import TokenFileError

    path = _path(data, tokens_file)
    try:
        described = [tokens_files.describe(entry) for entry in tokens_files.read(path)]
    except TokenFileError as error:
        raise _fail(str(error)) from None
    if as_json:
        click.echo(json.dumps({"file": str(path), "tokens": described}, indent=2))
        return
    from rich.table import Table

    from amc.cli.app import make_console

    table = Table(box=None, title=str(path), title_justify="left")
    for column in ("ID", "ROLE", "SCOPE"):
        table.add_column(column, no_wrap=True)
    for item in described:
        scope = (
            f"tenant {item['tenant']}"
            if "tenant" in item
            else f"host {item['host_id']}"
            if "host_id" in item
            else "all"
        )
        table.add_row(item["id"], item["role"], scope)
    make_console().print(table)


@tokens.command()
@click.argument("token_id")
@click.option("--json", "as_json", is_flag=True, help="Print the revoked entry (without its token) as JSON.")
@_file_options
def revoke(token_id: str, as_json: bool, data: Path, tokens_file: Path | None) -> None:
    """Remove the token whose id starts with TOKEN_ID (see `amc tokens list`)."""
    from amc.adapters.http import tokens_file as tokens_files
    from amc.adapters.http.auth import TokenFileError

    path = _path(data, tokens_file)
    try:
        gone = tokens_files.revoke(path, token_id)
    except TokenFileError as error:
        raise _fail(str(error), Exit.NOT_FOUND if "no token" in str(error) else Exit.FAILED) from None
    if as_json:
        click.echo(json.dumps(gone, indent=2))
    else:
        click.echo(
            f"Revoked {gone['role']} token {gone['id']} from {path}; a running server stops accepting it "
            "within two seconds."
        )
