"""`amc conformance`: run the conformance suite against a server and report by requirement id.

The suite is the package `amc.conformance` (its scenarios in amc/conformance/scenarios),
installed with the `conformance` extra, which brings pytest and Hypothesis:

    pip install 'agentic-mobile-control[conformance]'

This command runs pytest on the scenarios with the target's URL and tokens, passes every
further argument to pytest unchanged (``-k``, ``-x``, ``-v``, ...), and exits with pytest's
status. It runs with the suite's own pytest configuration, so it works the same from any
directory.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import click

PACKAGE = Path(__file__).resolve().parents[1] / "conformance"
SUITE = PACKAGE / "scenarios"
INSTALL = "pip install 'agentic-mobile-control[conformance]'"


def missing_requirements() -> list[str]:
    """The suite's own dependencies (the `conformance` extra) that are not installed."""
    return [name for name in ("pytest", "hypothesis") if importlib.util.find_spec(name) is None]


@click.command(context_settings={"ignore_unknown_options": True, "allow_interspersed_args": True})
@click.argument("url")
@click.option(
    "--tokens",
    "tokens_file",
    required=True,
    type=click.Path(dir_okay=False, exists=True, path_type=Path),
    envvar="AMC_CONFORMANCE_TOKENS",
    show_envvar=True,
    help="The server's tokens file (specs/protocol.md): two client tenants, two hosts and an admin.",
)
@click.option(
    "--report",
    type=click.Path(dir_okay=False, path_type=Path),
    default=Path("conformance-report.json"),
    show_default=True,
    help="Where to write the JSON report by requirement id.",
)
@click.option(
    "--restart-command",
    metavar="CMD",
    help="A shell command that restarts the server on the same data; enables the restart scenarios.",
)
@click.argument("pytest_args", nargs=-1, type=click.UNPROCESSED)
def conformance(
    url: str, tokens_file: Path, report: Path, restart_command: str | None, pytest_args: tuple[str, ...]
) -> None:
    """Run the conformance suite against the server at URL.

    Any further arguments go to pytest, e.g. `-k CANCEL -x`; put them after `--` if one
    of them could be mistaken for an option of this command.
    """
    missing = missing_requirements()
    if missing:
        raise click.ClickException(
            f"the conformance suite needs {' and '.join(missing)}, which this installation lacks: {INSTALL}"
        )
    if not (SUITE / "conftest.py").exists():
        raise click.ClickException(f"the conformance suite is not installed ({SUITE} does not exist): {INSTALL}")
    import pytest

    arguments = [
        str(SUITE),
        "-c",
        str(PACKAGE / "pytest.ini"),
        "--rootdir",
        str(SUITE),
        "--target-url",
        url,
        "--tokens",
        str(tokens_file.resolve()),
        "--conformance-report",
        str(report.resolve()),
        "-p",
        "no:cacheprovider",
        *(["--restart-command", restart_command] if restart_command else []),
        *pytest_args,
    ]
    sys.exit(int(pytest.main(arguments)))
