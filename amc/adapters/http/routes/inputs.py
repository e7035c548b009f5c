"""The input endpoints (specs/protocol.md Part F): uploads streamed into the `BlobStore` and
recorded for the tenant in the `InputCatalogue`; reads for the tenant's clients and for the
hosts running a task that names the input; the tenant's listing. And `check_references`, the
rule every submission, session action and steer passes: the inputs its steps name exist for
the task's tenant.

An upload runs the protocol's order of checks, with the bytes as late as possible:

    declared size over --max-input-bytes (413) -> authentication (401) -> a client or an
    admin (403) -> the sha256 and the query (400) -> declared size over the tenant's room
    (413) -> stream the body into the blob store (413 as soon as it passes its limit; a
    sha256 that does not match: 400; nothing kept either way) -> record it (201, 200)

The bytes are durable before the record is made, so a crash in between leaves bytes no record
names (gc removes them), never a record without bytes.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable

from starlette.datastructures import QueryParams
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse

from amc.adapters.http import access
from amc.adapters.http.auth import Principal
from amc.adapters.http.problems import Problem, invalid, not_found
from amc.adapters.http.routes import Resource
from amc.adapters.http.wire import json_response
from amc.core import inputs
from amc.core.lifecycle import TERMINAL_STATUSES, TaskStatus
from amc.core.records import JSON, Step
from amc.core.times import to_rfc3339
from amc.service import (
    SHA256,
    BlobMismatch,
    BlobNotFound,
    BlobTooLarge,
    InputCatalogue,
    Service,
    StoredInput,
    TaskQuery,
    TenantInputsFull,
    read_chunks,
    store_chunks,
)

UNFINISHED = tuple(status for status in TaskStatus if status not in TERMINAL_STATUSES)
LISTING_PAGE = 1000


def input_limit(limit: int) -> Problem:
    return Problem("payload_too_large", f"an input may hold at most {limit} bytes (--max-input-bytes)")


def tenant_limit(tenant: str, limit: int, stored: int) -> Problem:
    return Problem(
        "payload_too_large",
        f"the inputs of tenant {tenant!r} may hold at most {limit} bytes together (--max-tenant-input-bytes);"
        f" {stored} are stored",
    )


def input_view(found: StoredInput, in_use: bool, with_tenant: bool = False) -> dict[str, JSON]:
    view: dict[str, JSON] = {
        "ref": inputs.PREFIX + found.sha256,
        "sha256": found.sha256,
        "size": found.size,
        "created_at": to_rfc3339(found.created_at),
        "in_use": in_use,
    }
    if with_tenant:
        view["tenant"] = found.tenant
    return view


def named_in_unfinished_tasks(service: Service, tenant: str | None) -> set[tuple[str, str]]:
    """(tenant, sha256) of every input a task that has not ended names (of `tenant`, or of all)."""
    found: set[tuple[str, str]] = set()
    for status in UNFINISHED:
        query: TaskQuery | None = TaskQuery(limit=LISTING_PAGE, tenant=tenant, status=status)
        while query is not None:
            page = service.tasks(query)
            for task in page.tasks:
                found.update((task.tenant, sha256) for sha256 in inputs.task_references(task))
            query = query.following(page)
    return found


async def check_references(catalogue: InputCatalogue, tenant: str, named: Iterable[tuple[str, str]]) -> None:
    """400 for the first reference (where it sits, sha256) to an input `tenant` does not
    have; worded alike whether the input exists for another tenant or not at all. Looks
    nothing up when nothing is named (every task that names no input)."""
    for where, sha256 in named:
        if await asyncio.to_thread(catalogue.get, tenant, sha256) is None:
            raise invalid(f"{where} names input {inputs.PREFIX}{sha256}, which this tenant has not uploaded")


def step_references(steps: Iterable[Step]) -> list[tuple[str, str]]:
    """The references in `steps`' arguments, located as ``step 'install': argument 'apk'``."""
    return [
        (f"step {step_id!r}: argument {where!r}", sha256)
        for step_id, where, sha256 in inputs.step_references(list(steps))
    ]


def data_references(data: JSON) -> list[tuple[str, str]]:
    """The references in a message's `data` (a steer's or a follow-up's steps), located as
    ``data.steps[0].args.apk``."""
    return [(f"data.{where}", sha256) for where, sha256 in inputs.references(data)]


class Inputs(Resource):
    # -- upload -------------------------------------------------------------------------

    async def put_input(self, request: Request) -> Response:
        return await self._upload(request, request.path_params["sha256"])

    async def post_input(self, request: Request) -> Response:
        return await self._upload(request, None)

    async def _upload(self, request: Request, expected: str | None) -> Response:
        context, settings = self.context, self.context.settings
        declared = request.headers.get("content-length")
        if declared is not None and declared.isdigit() and int(declared) > settings.max_input_bytes:
            raise input_limit(settings.max_input_bytes)
        principal = self.scope.authenticate(request)  # the body is not read: it streams to the blob store
        access.require_role(principal, access.CLIENT_OR_ADMIN)
        if expected is not None and not SHA256.fullmatch(expected):
            raise invalid(f"sha256: {expected[:80]!r} is not 64 lowercase hex digits")
        tenant = self._tenant(principal, request.query_params, may_name=True)
        if declared is not None and not declared.isdigit():
            raise invalid("Content-Length: not a number")
        catalogue = context.inputs
        stored = await asyncio.to_thread(catalogue.total_bytes, tenant)
        limit = settings.max_input_bytes
        if expected is not None:
            # What this upload may hold: an input's limit, and the room the tenant's leaves it
            # (a repeat of an input the tenant has does not count its bytes twice). A POST
            # cannot know whether its bytes are a repeat until it has them: its record decides.
            existing = await asyncio.to_thread(catalogue.get, tenant, expected)
            room = settings.max_tenant_input_bytes - stored + (existing.size if existing is not None else 0)
            limit = min(limit, max(room, 0))
        if declared is not None and int(declared) > limit:
            raise tenant_limit(tenant, settings.max_tenant_input_bytes, stored)
        try:
            blob = await store_chunks(context.blobs, request.stream(), limit, expected)
        except BlobMismatch as mismatch:
            raise invalid(
                f"sha256: the bytes hash to {mismatch.actual}, not {mismatch.expected}; nothing was stored"
            ) from None
        except BlobTooLarge:
            if limit == settings.max_input_bytes:
                raise input_limit(limit) from None
            raise tenant_limit(tenant, settings.max_tenant_input_bytes, stored) from None
        now = context.service.clock.now()
        try:
            found, created = await asyncio.to_thread(
                catalogue.record, tenant, blob.sha256, blob.size, now, settings.max_tenant_input_bytes
            )
        except TenantInputsFull as full:
            raise tenant_limit(tenant, full.limit, full.stored) from None
        # A new record is named by no task yet (a submission naming it would have been
        # refused); only a repeat of one the tenant had asks the tasks.
        in_use = not created and (tenant, blob.sha256) in named_in_unfinished_tasks(context.service, tenant)
        location = f"/v1/inputs/{blob.sha256}"
        return json_response(input_view(found, in_use), 201 if created else 200, {"Location": location})

    # -- read -----------------------------------------------------------------------------

    async def download(self, request: Request) -> Response:
        principal, _ = await self.scope.begin(request)
        sha256 = request.path_params["sha256"]
        if not (SHA256.fullmatch(sha256) and await self._may_read(principal, sha256)):
            raise not_found(f"no input {sha256[:80]!r}")
        try:
            reader = await asyncio.to_thread(self.context.blobs.open, sha256)
        except BlobNotFound:
            raise not_found(f"the bytes of input {sha256!r} are missing (`amc store verify`)") from None
        headers = {"Content-Type": "application/octet-stream", "ETag": f'"{sha256}"', "Accept-Ranges": "bytes"}
        start = _range_start(request.headers.get("range"), reader.size)
        if start is None:
            headers["Content-Length"] = str(reader.size)
            return StreamingResponse(read_chunks(reader), headers=headers)
        await asyncio.to_thread(reader.seek, start)
        headers["Content-Length"] = str(reader.size - start)
        headers["Content-Range"] = f"bytes {start}-{reader.size - 1}/{reader.size}"
        return StreamingResponse(read_chunks(reader), status_code=206, headers=headers)

    async def _may_read(self, principal: Principal, sha256: str) -> bool:
        catalogue = self.context.inputs
        if principal.role == "client":
            assert principal.tenant is not None
            return await asyncio.to_thread(catalogue.get, principal.tenant, sha256) is not None
        if principal.role == "admin":
            return bool(await asyncio.to_thread(catalogue.holders, sha256))
        await self.scope.catch_up()  # a lapsed lease no longer holds its attempt
        for tenant in self._tenants_of_held_tasks_naming(principal.host, sha256):
            if await asyncio.to_thread(catalogue.get, tenant, sha256) is not None:
                return True
        return False

    def _tenants_of_held_tasks_naming(self, host_id: str, sha256: str) -> set[str]:
        """The tenants of the tasks whose active attempt `host_id` holds and that name `sha256`:
        the host's reserved devices lead to them (at most one attempt per device)."""
        service = self.context.service
        host = service.host(host_id)
        found: set[str] = set()
        for device in () if host is None else host.devices:
            reservation = device.reservation
            task = None if reservation is None else service.task(reservation.task_id)
            if task is None or reservation is None:
                continue
            attempt = task.attempts[reservation.attempt - 1]
            if attempt.host_id == host_id and attempt.outcome is None and sha256 in inputs.task_references(task):
                found.add(task.tenant)
        return found

    # -- list -----------------------------------------------------------------------------

    async def list_inputs(self, request: Request) -> Response:
        principal, _ = await self.scope.begin(request, access.CLIENT_OR_ADMIN)
        self._tenant(principal, request.query_params, may_name=False)  # refuses any query parameter
        scope = principal.scope
        await self.scope.catch_up()
        found = await asyncio.to_thread(self.context.inputs.listing, scope)
        named = named_in_unfinished_tasks(self.context.service, scope)
        views = [input_view(i, (i.tenant, i.sha256) in named, with_tenant=scope is None) for i in found]
        return json_response({"inputs": views})

    @staticmethod
    def _tenant(principal: Principal, query: QueryParams, *, may_name: bool) -> str:
        """The tenant a request acts for: a client's own; an admin's `?tenant=` (default
        `default`) where `may_name`. Any other query parameter is 400."""
        extra = sorted(set(query.keys()) - ({"tenant"} if may_name else set()))
        if extra:
            raise invalid(f"{extra[0]}: unknown query parameter")
        if principal.role == "client":
            if "tenant" in query:
                raise invalid("tenant: only an admin may name the tenant")
            assert principal.tenant is not None
            return principal.tenant
        named = query.getlist("tenant")
        if len(named) > 1:
            raise invalid("tenant: given twice")
        tenant = named[0] if named else "default"
        if not 0 < len(tenant) <= 128:
            raise invalid("tenant: must be 1-128 characters")
        return tenant


def _range_start(header: str | None, size: int) -> int | None:
    """The offset of a `Range: bytes=N-` that asks for part of the input, else None (the
    whole input: no Range, another form of it, or N at or past the end)."""
    if header is None or not header.startswith("bytes=") or not header.endswith("-"):
        return None
    offset = header[len("bytes=") : -1]
    if not offset.isdigit():
        return None
    start = int(offset)
    return start if 0 < start < size else None
