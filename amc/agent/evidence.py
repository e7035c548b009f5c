"""Storing a step's evidence in the control plane (specs/protocol.md Part C, "The Host Agent
and artifacts").

After each step, before the next one starts, the runner hands `Evidence.store` what the
step produced: the file of an observation (`screenshot` PNG, `ui_dump` XML, `logcat` text)
and its output. An output longer than what the report carries inline
(`wire.INLINE_OUTPUT_CHARS`) is written to a file and stored whole, as `text/plain`; the
report keeps its tail. Each file is uploaded (PUT .../attempts/{n}/artifacts/{name}?step=,
streamed from the disk), and the ids the server answers go into the step's outcome.

- Uploads wait until the step's earlier acknowledgements are answered: a step a steer
  inserted is the server's to take evidence of only once it has the host's admission.
- Names are fixed by the step (`{step id}-{what}{suffix}`, e.g. `open-screenshot.png`), so
  an upload whose answer was lost (no answer, a 5xx) is sent again with the same name and
  bytes, and the server answers 200 with the artifact it stored the first time.
- A refusal is the truth about the evidence, never a silent loss: the step keeps its
  status and its `reason` says what was not stored and the server's answer (e.g.
  ``screenshot not stored: 413 payload_too_large (...)``). A lease refusal (409
  ``lease_*``) is also lease loss, which the Execution is told, as for a renewal; nothing
  more is uploaded then.
- The files live in the attempt's directory. Without `--keep-artifacts` it is a temporary
  one: each file is removed once its upload has an answer, and the directory when the
  attempt ends (`close`).
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import re
import shutil
from collections.abc import Awaitable, Callable
from pathlib import Path

import attrs

from amc.core.records import Step

from .attempt import LEASE_REFUSALS, Attempt
from .client import Rejected, Uncertain
from .wire import INLINE_OUTPUT_CHARS

log = logging.getLogger("amc.agent.evidence")

OUTPUT_TYPE = "text/plain; charset=utf-8"
_SAFE_STEP_ID = re.compile(r"[A-Za-z0-9_-][A-Za-z0-9._-]{0,99}")


@attrs.define
class Upload:
    """One artifact upload and how the server answered it (for logs and tests)."""

    step: str
    name: str
    tries: int = 0
    answer: int | None = None  # the HTTP status that settled it (201, 200: stored before); None: lease lost first
    artifact_id: str | None = None


@attrs.frozen
class Stored:
    """What became of a step's evidence: the ids stored, and what was not (None: nothing missing)."""

    artifacts: tuple[str, ...] = ()
    missing: str | None = None


def artifact_name(step_id: str, what: str, suffix: str) -> str:
    """The name of a step's artifact: the same for the same step every time, and within the
    server's name rule (1-128 of A-Za-z0-9._-, no ``..``) whatever the step id holds."""
    stem = step_id
    if not _SAFE_STEP_ID.fullmatch(step_id) or ".." in step_id:
        digest = hashlib.sha256(step_id.encode()).hexdigest()[:10]  # two unsafe ids never share a name
        stem = re.sub(r"[^A-Za-z0-9_-]", "_", step_id)[:80] + "-" + digest
    return f"{stem}-{what}{suffix}"


class Evidence:
    """Uploads one attempt's evidence, step by step, from its executor's directory (where
    the executor writes its observations).

    Args:
        attempt: the attempt; its Execution is told of a lease loss, from the event loop only.
        settled: waits until every acknowledgement decided so far has its answer: the server
            takes evidence of a step a steer inserted only once it has the admission.
        keep: keep the files (``--keep-artifacts``); otherwise they are removed once uploaded.
    """

    def __init__(self, attempt: Attempt, *, settled: Callable[[], Awaitable[None]], keep: bool):
        self._attempt = attempt
        self._settled = settled
        self.directory = attempt.executor.artifacts_dir
        self.keep = keep
        self.uploads: list[Upload] = []

    async def store(
        self,
        step: Step,
        file: Path | None = None,
        content_type: str | None = None,
        output: str | None = None,
        *,
        more: tuple[Path, ...] = (),
        what: str | None = None,
    ) -> Stored:
        """Upload what `step` produced: its observation's `file` (and `more` files of the same
        type: a recording's later segments, named ``-2``, ``-3``...), and its `output` if too
        long to report inline. `what` names the files (default: the step's action)."""
        items: list[tuple[str, Path, str]] = []  # (what, file, content type)
        ids: list[str] = []
        missing: list[str] = []
        kind = what or step.action
        for number, path in enumerate(() if file is None else (file, *more), 1):
            items.append(
                (kind if number == 1 else f"{kind}-{number}", path, content_type or "application/octet-stream")
            )
        if output is not None and len(output) > INLINE_OUTPUT_CHARS:
            path = self.directory / artifact_name(step.id, "output", ".txt")
            try:
                await asyncio.to_thread(_write_text, path, output)
                items.append(("output", path, OUTPUT_TYPE))
            except OSError as error:  # e.g. a full disk: the step's output is still reported inline
                missing.append(f"output not stored: it could not be written to a local file: {error}")
        if items:
            await self._settled()
        for what, path, media_type in items:
            try:
                artifact_id, refusal = await self._upload(
                    step.id, artifact_name(step.id, what, path.suffix), path, media_type
                )
            finally:
                if not self.keep:
                    path.unlink(missing_ok=True)
            if artifact_id is not None:
                ids.append(artifact_id)
            else:
                missing.append(f"{what} not stored: {refusal}")
        return Stored(tuple(ids), "; ".join(missing) or None)

    def close(self) -> None:
        """The attempt is over: remove its temporary directory (kept with ``--keep-artifacts``)."""
        if not self.keep:
            shutil.rmtree(self.directory, ignore_errors=True)

    async def _upload(self, step_id: str, name: str, path: Path, content_type: str) -> tuple[str | None, str]:
        """Send one file until a definite answer: (its artifact id, "") or (None, why not)."""
        attempt = self._attempt
        a, label = attempt.assignment, attempt.label
        record = Upload(step=step_id, name=name)
        self.uploads.append(record)
        delay = attempt.backoff[0]
        while not attempt.lease_lost:
            record.tries += 1
            try:
                status, artifact = await attempt.channel.upload(
                    a.task_id, a.attempt, a.lease_id, step_id, name, path, content_type
                )
                artifact_id = str(artifact["id"])
            except Rejected as error:
                record.answer = error.status
                if error.status in LEASE_REFUSALS and error.code.startswith("lease_"):
                    log.warning("%s: upload of %s refused (%s): the lease is lost", label, name, error)
                    attempt.lease_refused(error.code)
                else:
                    log.error("%s: upload of %s refused (%s)", label, name, error)
                return None, f"{error.status} {error.code} ({error.detail})"
            except OSError as error:  # the local file went away or cannot be read: sending again will not help
                log.error("%s: cannot upload %s: %s", label, name, error)
                return None, f"the local file could not be read: {error}"
            except (Uncertain, ValueError, KeyError, TypeError) as error:  # no answer, or not an artifact
                log.warning("%s: upload of %s got no answer (%s); retrying in %.2g s", label, name, error, delay)
            else:
                record.answer, record.artifact_id = status, artifact_id
                log.info("%s: stored %s as %s", label, name, artifact_id)
                return artifact_id, ""
            delay = await attempt.retry_after(delay)
        return None, "the lease was lost"


def _write_text(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
