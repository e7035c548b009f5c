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
