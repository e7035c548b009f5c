"""Options that several commands share, declared once so they read and behave alike."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click

F = TypeVar("F", bound=Callable[..., Any])

DEFAULT_DATA = Path(".amc")


def data_option(help: str) -> Callable[[F], F]:
    """`--data DIR` (`AMC_DATA`, default `.amc`): the data directory of a local server."""
    return click.option(
        "--data",
        type=click.Path(file_okay=False, path_type=Path),
        default=DEFAULT_DATA,
        show_default=True,
        envvar="AMC_DATA",
        show_envvar=True,
        help=help,
    )


def adb_options(host_help: str, port_help: str) -> Callable[[F], F]:
    """`--adb-host` (`AMC_ADB_HOST`) and `--adb-port` (`AMC_ADB_PORT`): where an adb server listens."""

    def decorate(function: F) -> F:
        function = click.option(
            "--adb-port",
            type=click.IntRange(1, 65535),
            default=5037,
            show_default=True,
            envvar="AMC_ADB_PORT",
            show_envvar=True,
            help=port_help,
        )(function)
        return click.option(
            "--adb-host",
            default="127.0.0.1",
            show_default=True,
            envvar="AMC_ADB_HOST",
            show_envvar=True,
            help=host_help,
        )(function)

    return decorate
