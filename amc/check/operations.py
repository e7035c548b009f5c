"""A recorded history read back: one `Operation` per line of the recorder's files.

Times are on one timeline for all files: the clients' monotonic clocks when every file was
written during one boot of one machine (they are one clock then), else their wall clocks,
which is only as good as the machines' clock synchronisation (the checker's ``slack``).
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

import attrs
import orjson


@attrs.frozen(kw_only=True)
class Operation:
    """One request a client made, and what it was told.

    Attributes:
        client: who asked (a host id for a Host Agent).
        kind: claim, start, renew, result, release, submit, cancel, message or read.
        task: the task the path names (for a claim: None; see `answer`).
        attempt: the attempt the path names, if any.
        host: the host a claim was made for.
        start, end: when the request was handed over and when its answer was in (seconds).
        status: the HTTP status, or None when no answer came (its outcome is unknown).
        request, answer: the fields of the bodies the checker reads.
        source: file and line, for the checker's reports.
    """

    client: str
    kind: str
    task: str | None
    attempt: int | None
    host: str | None
    start: float
    end: float
    status: int | None
    request: dict[str, Any]
    answer: dict[str, Any]
    source: str

    @property
    def ok(self) -> bool:
        """A 2xx answer: the server acknowledged it."""
        return self.status is not None and 200 <= self.status < 300

    @property
    def task_id(self) -> str | None:
        """The task the operation concerns (a claim names it in its answer)."""
        return self.task or self.answer.get("task_id") or (self.answer.get("id") if self.kind == "submit" else None)


@attrs.frozen
class History:
    """Every operation of a run, in order of start; `clock` names the timeline used."""

    operations: tuple[Operation, ...]
    clock: str  # "monotonic" or "wall"
    files: int
    unknown: int  # requests that got no answer


def read(paths: Iterable[Path]) -> History:
    """The operations of the history files, on one timeline."""
    lines: list[tuple[str, dict[str, Any]]] = []
    boots: set[str] = set()
    files = 0
    for path in paths:
        files += 1
        with open(path, "rb") as file:
            for number, raw in enumerate(file, 1):
                if not raw.strip():
                    continue
                try:
                    record = orjson.loads(raw)
                except orjson.JSONDecodeError:
                    continue  # a line cut by a killed writer (only the last one can be)
                if record.get("kind") == "header":
                    boots.add(str(record.get("boot")))
                elif "t1" in record:
                    lines.append((f"{path.name}:{number}", record))
    monotonic = len(boots) == 1 and not next(iter(boots)).startswith("pid-")
    start, end = ("t0", "t1") if monotonic else ("w0", "w1")
    operations = sorted(
        (_operation(source, record, start, end) for source, record in lines), key=lambda op: (op.start, op.end)
    )
    unknown = sum(op.status is None for op in operations)
    return History(tuple(operations), "monotonic" if monotonic else "wall", files, unknown)


def _operation(source: str, record: dict[str, Any], start: str, end: str) -> Operation:
    attempt = record.get("attempt")
    return Operation(
        client=str(record["client"]),
        kind=str(record["kind"]),
        task=record.get("task"),
        attempt=int(attempt) if attempt is not None else None,
        host=record.get("host"),
        start=float(record[start]),
        end=float(record[end]),
        status=record.get("status"),
        request=record.get("request") or {},
        answer=record.get("answer") or {},
        source=source,
    )
