"""`amc input`: upload files once and name them in plans (specs/protocol.md Part F).

`amc input upload FILE` prints the reference a plan names the file by, `{"input":
"sha256:..."}`; `amc input list` shows the tenant's inputs. `amc task submit` uploads the
files a plan names as ``"@path"`` itself, through `upload` below.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from amc.cli.app import EXIT_HELP, Application, Exit, caller_command


@click.group("input", epilog=EXIT_HELP)
def input_group() -> None:
    """Upload files (an app to install, a fixture to push) and list them. A plan names an
    uploaded file as {"input": "sha256:..."}, or as "@path" in a file given to `amc task submit`."""


def upload(app: Application, path: Path) -> dict[str, Any]:
    """Upload the file at `path` for the caller's tenant: the input (its `ref` names it)."""
    if not path.is_file():
        app.abort(f"cannot upload {path}: not a file", Exit.INVALID)
    found, _ = app.client.upload_input(path)
    return found


@input_group.command("upload")
@click.argument("file", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@caller_command
def upload_command(app: Application, file: Path) -> None:
    """Upload FILE as an input and print its reference, sha256:<hex>."""
    found = upload(app, file)
    app.display_result(found, lambda: found["ref"])


@input_group.command("list")
@caller_command
def list_command(app: Application) -> None:
    """The tenant's inputs, oldest first: reference, size, when uploaded, and whether a task
    that has not ended names it."""
    from rich.table import Table

    from amc.cli.views import size_text

    found = app.client.inputs()

    def table() -> Any:
        if not found:
            return "No inputs."
        shown = Table(box=None)
        for column in ("ref", "size", "uploaded", "in use"):
            shown.add_column(column)
        for item in found:
            shown.add_row(item["ref"], size_text(item["size"]), item["created_at"], "yes" if item["in_use"] else "no")
        return shown

    app.display_result({"inputs": found}, table)
