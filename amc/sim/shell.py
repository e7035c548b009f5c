"""The simulated `/system/bin/sh -c`: runs a parsed script inside one SimProcess.

Stdout and stderr are merged onto the stream, as in adbd's raw shell (specs/adb.md §3.7),
unless a redirection says otherwise. A pipeline runs its commands one after the other,
each reading the previous one's whole output; that is enough for `dumpsys … | grep …`
but means a long-running command in a pipe does not stream.

`sh`, `timeout` and `exit` are built in here because they run other commands; every
other program lives in `programs`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from . import programs
from .invocation import Invocation, Output, parse_duration
from .process import SimProcess, TimeLimitReached
from .shell_syntax import AndOr, Command, Pipeline, Script, ShellSyntaxError, Word, parse

if TYPE_CHECKING:
    from .device import SimDevice

SH = "/system/bin/sh"
_BIN_DIRS = ("/system/bin/", "/system/xbin/", "/bin/", "/vendor/bin/")


class _Exit(Exception):
    """`exit N` unwinds the current (sub)shell; `status` (also args[0]) is N."""

    def __init__(self, status: int):
        super().__init__(status)
        self.status = status


# --- outputs ---------------------------------------------------------------------


class ProcessOutput:
    """Bytes written here go to the process's stream."""

    def __init__(self, process: SimProcess):
        self._process = process

    def write(self, data: bytes) -> None:
        self._process.write(data)


class BufferOutput:
    """Collects a pipeline stage's output for the next stage's stdin."""

    def __init__(self) -> None:
        self.data = bytearray()

    def write(self, data: bytes) -> None:
        self.data += data


class NullOutput:
    def write(self, data: bytes) -> None:
        pass


class FileOutput:
    """`> file`: the text lands in the device's file store."""

    def __init__(self, device: SimDevice, path: str, append: bool):
        self._device, self._path = device, path
        if not append or path not in device.files:
            device.files[path] = b""

    def write(self, data: bytes) -> None:
        self._device.files[self._path] += data


class Shell:
    """One shell instance (nested `sh -c` gets its own positional parameters)."""

    def __init__(self, device: SimDevice, process: SimProcess, positional: list[str] | None = None):
        self.device = device
        self.process = process
        self.positional = positional or [SH]
        self.status = 0
        self.variables = {
            "HOME": "/",
            "PATH": "/system/bin:/system/xbin",
            "USER": "shell",
            "ANDROID_DATA": "/data",
            "EXTERNAL_STORAGE": "/sdcard",
        }

    def run(self, source: str) -> int:
        """Run a whole command line and return its exit status."""
        out = ProcessOutput(self.process)
        try:
            script = parse(source)
        except ShellSyntaxError as error:
            out.write(f"{SH}: syntax error: {error}\n".encode())
            return 2
        try:
            return self.run_script(script, out)
        except _Exit as exit_:
            return exit_.status

    def run_script(self, script: Script, out: Output) -> int:
        for item in script.items:
            self.status = self._run_and_or(item, out)
        return self.status

    def _run_and_or(self, node: AndOr, out: Output) -> int:
        status = self._run_pipeline(node.first, out)
        for op, pipeline in node.rest:
            if (op == "&&") == (status == 0):
                status = self._run_pipeline(pipeline, out)
            self.status = status
        return status

    def _run_pipeline(self, node: Pipeline, out: Output) -> int:
        stdin = b""
        status = 0
        for index, command in enumerate(node.commands):
            if index == len(node.commands) - 1:
                status = self._run_command(command, stdin, out)
            else:
                stage_out = BufferOutput()
                status = self._run_command(command, stdin, stage_out)
                stdin = bytes(stage_out.data)
        return status

    def _run_command(self, node: Command, stdin: bytes, out: Output) -> int:
        self.process.check()
        argv = [self.expand(word) for word in node.words]
        fds: dict[int, Output] = {1: out, 2: out}
        for redirect in node.redirects:
            target = self.expand(redirect.target)
            if redirect.op == ">&":
                if not target.isdigit() or int(target) not in fds:
                    ProcessOutput(self.process).write(f"{SH}: {target}: bad file descriptor\n".encode())
                    return 1
                fds[redirect.fd] = fds[int(target)]
            elif target == "/dev/null":
                fds[redirect.fd] = NullOutput()
            else:
                fds[redirect.fd] = FileOutput(self.device, target, redirect.op == ">>")
        if not argv:
            return 0
        return self.run_argv(argv, stdin, fds[1], fds[2])

    def run_argv(self, argv: list[str], stdin: bytes, stdout: Output, stderr: Output) -> int:
        """Run one program by name; the exit status is that of the program."""
        name = argv[0]
        for directory in _BIN_DIRS:
            if name.startswith(directory):
                name = name[len(directory) :]
                break
        invocation = Invocation(self.device, self.process, self, argv, stdin, stdout, stderr)
        builtin = _BUILTINS.get(name)
        if builtin is not None:
            return builtin(invocation)
        program = programs.REGISTRY.get(name)
        if program is None:
            invocation.err(f"{SH}: {argv[0]}: not found\n")
            return 127
        return program(invocation)

    def expand(self, word: Word) -> str:
        pieces = []
        for kind, text in word.parts:
            pieces.append(text if kind == "lit" else self._variable(text))
        return "".join(pieces)

    def _variable(self, name: str) -> str:
        if name == "?":
            return str(self.status)
        if name == "$":
            return str(self.process.pid)
        if name == "#":
            return str(len(self.positional) - 1)
        if name.isdigit():
            index = int(name)
            return self.positional[index] if index < len(self.positional) else ""
        return self.variables.get(name, "")


# --- builtins that run other commands ---------------------------------------------


def _sh(inv: Invocation) -> int:
    args = inv.args
    if not args or args[0] != "-c" or len(args) < 2:
        inv.err(f"{SH}: only 'sh -c COMMAND [ARG0 [ARG...]]' is simulated\n")
        return 2
    positional = args[2:] or [SH]
    nested = Shell(inv.device, inv.process, positional)
    try:
        script = parse(args[1])
    except ShellSyntaxError as error:
        inv.err(f"{SH}: syntax error: {error}\n")
        return 2
    try:
        return nested.run_script(script, inv.stdout)
    except _Exit as exit_:
        return exit_.status


def _timeout(inv: Invocation) -> int:
    args = list(inv.args)
    # Options are accepted and ignored: the simulated kill is the same for every signal.
    while args and args[0].startswith("-") and args[0] != "--":
        option = args.pop(0)
        if option in ("-s", "-k") and args:
            args.pop(0)
    if args and args[0] == "--":
        args.pop(0)
    if len(args) < 2 or (limit := parse_duration(args[0])) is None:
        inv.err("usage: timeout [-k DURATION] [-s SIGNAL] DURATION COMMAND...\n")
        return 125
    with inv.process.time_limit(limit) as token:
        try:
            return inv.shell.run_argv(args[1:], inv.stdin, inv.stdout, inv.stderr)
        except TimeLimitReached as reached:
            if reached.args[0] is not token:
                raise
            return 124


def _exit(inv: Invocation) -> int:
    code = inv.args[0] if inv.args else str(inv.shell.status)
    raise _Exit(int(code) & 0xFF if code.lstrip("-").isdigit() else 2)


_BUILTINS = {"sh": _sh, "timeout": _timeout, "exit": _exit}
