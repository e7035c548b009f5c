"""The `amc` command line.

Each command group lives in its own module and is imported only when it is invoked, so
`amc --help` never opens storage, sockets or devices.
"""

from __future__ import annotations

import importlib
from typing import Any

import click

# command name -> "module:attribute" of the click command or group it runs.
COMMANDS: dict[str, str] = {
    "model": "amc.cli.model:model",
    "sim": "amc.cli.sim:sim",
    "store": "amc.cli.store:store",
    "serve": "amc.cli.serve:serve",
    "host": "amc.cli.host:host",
    "conformance": "amc.cli.conformance:conformance",
    "task": "amc.cli.task:task",
    "input": "amc.cli.inputs:input_group",
    "up": "amc.cli.up:up",
    "demo": "amc.cli.demo.command:demo",
    "tokens": "amc.cli.tokens:tokens",
    "mcp": "amc.cli.mcp:mcp",
    "check-history": "amc.cli.check_history:check_history",
}


class LazyGroup(click.Group):
    """A click group whose subcommands are imported on first use."""

    def __init__(self, *args: Any, lazy: dict[str, str], **kwargs: Any):
        super().__init__(*args, **kwargs)
        self._lazy = lazy

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(set(super().list_commands(ctx)) | set(self._lazy))

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        if name in self._lazy:
            module_name, attribute = self._lazy[name].split(":")
            command: click.Command = getattr(importlib.import_module(module_name), attribute)
            return command
        return super().get_command(ctx, name)


@click.group(cls=LazyGroup, lazy=COMMANDS, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="agentic-mobile-control", prog_name="amc")
def main() -> None:
    """amc: schedule tasks onto Android devices and control them while they run."""
