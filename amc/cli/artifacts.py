"""`amc task artifacts --download` and `amc task logs`: a task's evidence, fetched from the
server (specs/protocol.md Part C) and checked against its sha256 as it arrives.

Both work from the artifact listing, `GET /v1/tasks/{id}/artifacts`, in which every
artifact names its attempt and step; a step outcome's own list of artifact ids is not needed.
"""

from __future__ import annotations

import codecs
import hashlib
import os
import re
import time
from collections.abc import Callable
from contextlib import nullcontext
from pathlib import Path
from typing import Any

import click

from amc.cli.app import Application, Exit
from amc.cli.client import Refused

# An artifact's name as the protocol allows it: one path component, never `.` or `..`. The
# server refuses any other, and the CLI checks again before it makes a file of one.
SAFE_NAME = re.compile(r"[A-Za-z0-9._-]{1,128}")
TEXT_TYPES = ("text/plain",)  # printed by `amc task logs`; other types are only named
PROGRESS_EVERY_S = 0.1


def is_text(artifact: dict[str, Any]) -> bool:
    """A text/plain artifact (a parameter such as `; charset=utf-8` aside): a step's full output or a log."""
    return artifact["content_type"].split(";")[0].strip().lower() in TEXT_TYPES


def target_of(directory: Path, artifact: dict[str, Any]) -> Path:
    """Where `--download DIR` puts an artifact: DIR/attempt-N/NAME (names are unique within an attempt)."""
    name: str = artifact["name"]
    if not SAFE_NAME.fullmatch(name) or ".." in name or name == ".":
        raise click.ClickException(f"the server listed an artifact named {name!r}, which is not a safe file name")
    return directory / f"attempt-{int(artifact['attempt'])}" / name


def file_sha256(path: Path) -> str:
    with open(path, "rb") as file:
        return hashlib.file_digest(file, "sha256").hexdigest()


class HashingFile:
    """A file being written that hashes what goes into it."""

    def __init__(self, file: Any):
        self.file = file
        self.hash = hashlib.sha256()

    def write(self, chunk: bytes) -> None:
        self.file.write(chunk)
        self.hash.update(chunk)


# -- download -------------------------------------------------------------------------------


def download_all(
    app: Application, task_id: str, artifacts: list[dict[str, Any]], directory: Path, overwrite: bool
) -> None:
    """Download every artifact of the listing into `directory`; see `amc task artifacts --help`."""
    from amc.cli.views import size_text

    planned: list[tuple[dict[str, Any], Path, bool]] = []  # (artifact, target, already there)
    differing: list[Path] = []
    for artifact in artifacts:
        target = target_of(directory, artifact)
        if target.is_file() and file_sha256(target) == artifact["sha256"]:
            planned.append((artifact, target, True))
        elif target.exists() and not overwrite:
            differing.append(target)
        else:
            planned.append((artifact, target, False))
    if differing:
        paths = ", ".join(str(path) for path in differing)
        app.abort(
            f"{len(differing)} file(s) already in {directory} hold other bytes than the artifact: {paths}; "
            "nothing was downloaded (--overwrite replaces them)",
            Exit.FAILED,
        )
    directory.mkdir(parents=True, exist_ok=True)
    total = sum(artifact["size"] for artifact, _, there in planned if not there)
    report: list[dict[str, Any]] = []
    failures: list[str] = []
    done = 0
    spinner = app.out.status("") if app.out.is_terminal and not app.as_json else nullcontext()
    with spinner as status:
        for artifact, target, there in planned:
            shown = target.relative_to(directory)
            if there:
                report.append({**artifact, "path": str(target), "outcome": "unchanged"})
                app.display(f"  unchanged   {shown} (the same bytes are already there)")
                continue

            def progress(got: int, name: str = artifact["name"], before: int = done) -> None:
                if status is not None:
                    status.update(f"downloading {name}: {size_text(before + got)} of {size_text(total)}")

            outcome = _download_one(app, task_id, artifact, target, progress)
            done += artifact["size"]
            report.append({**artifact, "path": str(target), "outcome": outcome})
            if outcome == "downloaded":
                app.display(f"  downloaded  {shown} ({size_text(artifact['size'])}, sha256 checked)")
            else:
                failures.append(f"{shown} ({outcome})")
                app.display(f"  [red]FAILED[/red]      {shown}: {outcome}; nothing kept")
    if app.as_json:
        app.display_json({"task_id": task_id, "directory": str(directory), "artifacts": report})
    else:
        fetched = sum(1 for entry in report if entry["outcome"] == "downloaded")
        kept = sum(1 for entry in report if entry["outcome"] == "unchanged")
        app.display(
            f"{fetched} artifact(s) downloaded into {directory} ({size_text(done)})"
            + (f", {kept} already there" if kept else "")
            + "."
        )
    if failures:
        app.abort(f"{len(failures)} artifact(s) not downloaded: " + "; ".join(failures), Exit.FAILED)


def _download_one(
    app: Application, task_id: str, artifact: dict[str, Any], target: Path, progress: Callable[[int], None]
) -> str:
    """Stream one artifact to a temporary beside `target` and move it into place if its bytes
    are the artifact's: "downloaded", or why not ("sha256 mismatch: ...", the server's refusal)."""
    target.parent.mkdir(parents=True, exist_ok=True)
    temporary = target.with_name(f".{target.name}.part")
    got = 0
    last = 0.0

    def counted(n: int) -> None:
        nonlocal got, last
        got += n
        if time.monotonic() - last >= PROGRESS_EVERY_S:
            last = time.monotonic()
            progress(got)

    try:
        with open(temporary, "wb") as file:
            sink = HashingFile(file)
            app.client.download(task_id, artifact["id"], sink, counted)
        actual = sink.hash.hexdigest()
        if actual != artifact["sha256"] or got != artifact["size"]:
            return f"sha256 mismatch: expected {artifact['sha256']}, got {actual} ({got} of {artifact['size']} bytes)"
        os.replace(temporary, target)
        return "downloaded"
    except Refused as error:  # e.g. 404: the bytes are missing on the server; the others still come
        return error.message
    finally:
        temporary.unlink(missing_ok=True)


# -- logs -----------------------------------------------------------------------------------


class EchoText:
    """A byte sink that prints what it receives as UTF-8 text, as it arrives (a character
    split between two chunks is held back until it is whole)."""

    def __init__(self) -> None:
        self.decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self.last = ""

    def write(self, chunk: bytes) -> None:
        self.emit(self.decoder.decode(chunk))

    def close(self) -> None:
        self.emit(self.decoder.decode(b"", final=True))
        if self.last and not self.last.endswith("\n"):
            click.echo()

    def emit(self, text: str) -> None:
        if text:
            click.echo(text, nl=False)
            self.last = text


class GatherText:
    """A byte sink that keeps the text it receives (for --json, which holds it whole)."""

    def __init__(self) -> None:
        self.parts: list[bytes] = []

    def write(self, chunk: bytes) -> None:
        self.parts.append(chunk)

    def text(self) -> str:
        return b"".join(self.parts).decode("utf-8", errors="replace")


def step_rows(
    task: dict[str, Any], artifacts: list[dict[str, Any]]
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The steps to print and the artifacts they may use: the outcomes of the task's result
    (the last attempt's), then any step of the last attempt that stored artifacts but has no
    outcome yet (a task still running)."""
    last = len(task.get("attempts") or [])
    mine = [artifact for artifact in artifacts if artifact["attempt"] == last]
    steps = [dict(step) for step in (task.get("result") or {}).get("steps") or []]
    known = {step["id"] for step in steps}
    for artifact in mine:
        if artifact["step"] not in known:
            known.add(artifact["step"])
            steps.append({"id": artifact["step"], "status": "running"})
    return steps, mine


def print_logs(app: Application, task_id: str) -> None:
    """`amc task logs ID`: see its --help."""
    from amc.cli.views import size_text

    task = app.client.task(task_id)
    steps, artifacts = step_rows(task, app.client.artifacts(task_id))
    if app.as_json:
        app.display_json({"task_id": task_id, "steps": [_step_json(app, task_id, step, artifacts) for step in steps]})
        return
    if not steps:
        app.display_info(f"{task_id} is {task['status']}: no step has reported an output yet.")
        return
    for step in steps:
        texts = [a for a in artifacts if a["step"] == step["id"] and is_text(a)]
        others = [a for a in artifacts if a["step"] == step["id"] and not is_text(a)]
        reason = f", {step['reason']}" if step.get("reason") else ""
        click.echo(click.style(f"== {step['id']} ({step['status']}{reason})", bold=True))
        if texts:
            for artifact in texts:
                click.echo(click.style(f"-- {artifact['name']} ({size_text(artifact['size'])})", dim=True))
                sink = EchoText()
                app.client.download(task_id, artifact["id"], sink)
                sink.close()
        elif step.get("output"):
            output = step["output"]
            click.echo(output if output.endswith("\n") else output + "\n", nl=False)
        for artifact in others:
            click.echo(
                click.style(
                    f"-- {artifact['name']} ({artifact['content_type']}, {size_text(artifact['size'])}): "
                    f"amc task artifacts {task_id} --download DIR",
                    dim=True,
                )
            )


def _step_json(app: Application, task_id: str, step: dict[str, Any], artifacts: list[dict[str, Any]]) -> dict[str, Any]:
    texts = [a for a in artifacts if a["step"] == step["id"] and is_text(a)]
    output = step.get("output")
    if texts:
        parts = []
        for artifact in texts:
            sink = GatherText()
            app.client.download(task_id, artifact["id"], sink)
            parts.append(sink.text())
        output = "".join(parts)
    return {
        "id": step["id"],
        "status": step["status"],
        "output": output,
        "output_from": [a["id"] for a in texts] if texts else ("inline" if output is not None else None),
        "artifacts": [a["id"] for a in artifacts if a["step"] == step["id"]],
    }
