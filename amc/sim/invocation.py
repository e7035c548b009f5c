"""What a simulated program receives when it runs, and helpers to read its arguments."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Protocol

import attrs

if TYPE_CHECKING:
    from .device import SimDevice
    from .process import SimProcess
    from .shell import Shell


class Output(Protocol):
    def write(self, data: bytes) -> None: ...


@attrs.define
class Invocation:
    """Everything a program sees: its device, process, arguments and standard streams."""

    device: SimDevice
    process: SimProcess
    shell: Shell
    argv: list[str]
    stdin: bytes
    stdout: Output
    stderr: Output

    @property
    def args(self) -> list[str]:
        return self.argv[1:]

    def out(self, text: str | bytes) -> None:
        self.stdout.write(text.encode() if isinstance(text, str) else bytes(text))

    def err(self, text: str) -> None:
        self.stderr.write(text.encode())


_DURATION = re.compile(r"^(\d+(?:\.\d*)?|\.\d+)([smhd]?)$")
_UNIT = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400}


def parse_duration(text: str) -> float | None:
    """toybox duration syntax: a number with an optional s/m/h/d suffix; None if invalid."""
    match = _DURATION.match(text)
    if not match:
        return None
    return float(match.group(1)) * _UNIT[match.group(2)]
