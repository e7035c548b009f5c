"""Inputs (specs/protocol.md Part F): how a plan or a session names a file a caller uploaded.

An argument value ``{"input": "sha256:<64 lowercase hex>"}`` is a reference to an input of
the task's tenant. References are found generically, anywhere inside a step's arguments
(`references`), so the edge's check at submit ("every input a step names exists for the
tenant") and the host's right to read an input ("it holds an attempt of a task naming it")
need no list of which actions take inputs. Which arguments accept a reference is the action
table's business: an action that takes an input declares that argument's check as
`input_argument`, and a plan that puts a reference anywhere else is refused as any wrongly
typed argument is.

Pure: no IO, no clock; the bytes and the records of inputs live outside the kernel.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from amc.core.records import JSON, Step, Task

PREFIX = "sha256:"
KEY = "input"
HEX = re.compile(r"[0-9a-f]{64}")


def reference(sha256: str) -> dict[str, JSON]:
    """The argument value that names the input `sha256`."""
    return {KEY: PREFIX + sha256}


def referenced_sha256(value: object) -> str | None:
    """The sha256 `value` names, if it is exactly a reference ``{"input": "sha256:<hex>"}``."""
    if not (isinstance(value, dict) and len(value) == 1):
        return None
    text = value.get(KEY)
    if not (isinstance(text, str) and text.startswith(PREFIX) and HEX.fullmatch(text[len(PREFIX) :])):
        return None
    return text[len(PREFIX) :]


def input_argument(value: object) -> str | None:
    """An action table's argument check (None when fine, else what the value should have
    been) for an argument that takes an input."""
    if referenced_sha256(value) is None:
        return 'an input reference {"input": "sha256:<64 lowercase hex digits>"}'
    return None


def references(value: JSON) -> Iterator[tuple[str, str]]:
    """Every reference inside `value`, with where it sits (``apk``, ``files[2].src``)."""
    yield from _walk(value, "")


def _walk(value: JSON, where: str) -> Iterator[tuple[str, str]]:
    found = referenced_sha256(value)
    if found is not None:
        yield where, found
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from _walk(item, f"{where}.{key}" if where else key)
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _walk(item, f"{where}[{index}]")


def step_references(steps: tuple[Step, ...] | list[Step]) -> Iterator[tuple[str, str, str]]:
    """(step id, argument path, sha256) of every reference in the arguments of `steps`."""
    for step in steps:
        for where, sha256 in references(step.args):
            yield step.id, where, sha256


def task_references(task: Task) -> set[str]:
    """The sha256 of every input the task names: in its plan, its session's actions, and the
    steps its steers carry."""
    found = {sha256 for _, _, sha256 in step_references(task.plan.all_steps())}
    if task.session is not None:
        found.update(sha256 for _, _, sha256 in step_references([a.step for a in task.session.actions]))
    for message in task.messages:
        if message.data:
            found.update(sha256 for _, sha256 in references(message.data))
    return found
