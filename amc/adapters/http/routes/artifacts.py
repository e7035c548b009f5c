"""The artifact endpoints (specs/protocol.md Part C): uploads streamed into a `BlobStore`,
then recorded by the kernel; listings and downloads for whoever may read the task.

An upload runs the protocol's order of checks, with the bytes as late as possible:

    declared size over --max-artifact-bytes (413) -> authentication (401) -> a host (403)
    -> the task and attempt exist (404) -> name, step, lease header (400) -> the step and
    the lease checks on the task as read (400, 409) -> stream the body into the blob store
    (413 as soon as it passes its limit; nothing kept) -> the kernel records it (201, 200,
    or its refusal: a lease that lapsed meanwhile, a name taken by other bytes)

The checks before the bytes only spare a refused host the upload; the kernel decides
again on the state when the command runs. Bytes refused after they were stored are an
unreferenced blob, which the store's gc removes (see `amc.service`).
"""

from __future__ import annotations

import asyncio
import re
import secrets

import attrs
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse

from amc.adapters.http import access, wire
from amc.adapters.http.problems import Problem, invalid, not_found
from amc.adapters.http.routes import Resource
from amc.adapters.http.wire import json_response
from amc.core import artifacts
from amc.core.commands import StoreArtifact
from amc.core.decisions import ArtifactRecorded
from amc.core.records import Task
from amc.service import BlobNotFound, BlobTooLarge, read_chunks, store_chunks

LEASE_HEADER = "amc-lease-id"
DEFAULT_CONTENT_TYPE = "application/octet-stream"
NAME = re.compile(r"[A-Za-z0-9._-]{1,128}")
MAX_CONTENT_TYPE_LENGTH = 255


def new_artifact_id() -> str:
    return "a_" + secrets.token_hex(10)


def check_name(name: str) -> None:
    if not NAME.fullmatch(name) or ".." in name or name == ".":
        raise invalid(f"name: {name[:140]!r} must be 1-128 of A-Za-z0-9._- and not . or contain ..")


def artifact_limit(limit: int) -> Problem:
    return Problem("payload_too_large", f"an artifact may hold at most {limit} bytes (--max-artifact-bytes)")


def task_limit(task: Task, limit: int) -> Problem:
    return Problem("payload_too_large", artifacts.over_task_limit(task, limit))


class Artifacts(Resource):
    async def upload(self, request: Request) -> Response:
        context, settings = self.context, self.context.settings
        declared = request.headers.get("content-length")
        if declared is not None and declared.isdigit() and int(declared) > settings.max_artifact_bytes:
            raise artifact_limit(settings.max_artifact_bytes)
        principal = self.scope.authenticate(request)  # the body is not read: it streams to the blob store
        access.require_role(principal, access.HOST)
        task, task_id, number = self.scope.attempt_target(request)
        name = request.path_params["name"]
        check_name(name)
        step = request.query_params.get("step")
        if not step:
            raise invalid("step: the query parameter ?step= names the step the artifact belongs to")
        lease_id = request.headers.get(LEASE_HEADER)
        if not lease_id:
            raise invalid("Amc-Lease-Id: the header carries the attempt's lease_id")
        if declared is not None and not declared.isdigit():
            raise invalid("Content-Length: not a number")
        content_type = request.headers.get("content-type") or DEFAULT_CONTENT_TYPE
        if len(content_type) > MAX_CONTENT_TYPE_LENGTH:
            raise invalid(f"Content-Type: at most {MAX_CONTENT_TYPE_LENGTH} characters")
        command = StoreArtifact(
            now=context.service.clock.now(),
            host_id=principal.host,
            task_id=task_id,
            attempt=number,
            lease_id=lease_id,
            artifact_id=new_artifact_id(),
            step=step,
            name=name,
            content_type=content_type,
            size=0,
            sha256="",
            max_task_bytes=settings.max_task_artifact_bytes,
        )
        refused = artifacts.refusal(task, command)
        if refused is not None and refused.rejection is not None:
            raise Problem(refused.rejection.code.name, refused.rejection.detail)
        # What this upload may hold: an artifact's limit, and the room the task's limit leaves it.
        left = artifacts.room(task, number, name, settings.max_task_artifact_bytes)
        limit = min(settings.max_artifact_bytes, max(left, 0))
        if declared is not None and int(declared) > limit:
            raise task_limit(task, settings.max_task_artifact_bytes)
        try:
            stored = await store_chunks(context.blobs, request.stream(), limit)
        except BlobTooLarge:
            if limit == settings.max_artifact_bytes:
                raise artifact_limit(limit) from None
            raise task_limit(task, settings.max_task_artifact_bytes) from None
        command = attrs.evolve(command, now=0, size=stored.size, sha256=stored.sha256)  # the service stamps it
        reply = await self.scope.decide(command, ArtifactRecorded)
        location = f"/v1/tasks/{task_id}/artifacts/{reply.artifact.id}"
        status = 201 if reply.created else 200
        return json_response(wire.artifact_view(task_id, reply.artifact), status, {"Location": location})

    # The artifacts of a task are read by whoever may read the task (as `GET /v1/tasks/{id}`).

    async def list_artifacts(self, request: Request) -> Response:
        task = await self.scope.readable_task(request)
        return json_response({"artifacts": [wire.artifact_view(task.id, a) for a in task.artifacts]})

    async def download(self, request: Request) -> Response:
        task = await self.scope.readable_task(request)
        artifact_id = request.path_params["artifact_id"]
        artifact = artifacts.by_id(task, artifact_id)
        if artifact is None:
            raise not_found(f"task {task.id!r} has no artifact {artifact_id!r}")
        try:
            reader = await asyncio.to_thread(self.context.blobs.open, artifact.sha256)
        except BlobNotFound:
            raise not_found(f"the bytes of artifact {artifact.id!r} are missing (`amc store verify`)") from None
        # The Content-Type exactly as uploaded (as `media_type`, Starlette would add a charset to text/*).
        headers = {
            "Content-Type": artifact.content_type,
            "Content-Length": str(reader.size),
            "ETag": f'"{artifact.sha256}"',
        }
        return StreamingResponse(read_chunks(reader), headers=headers)
