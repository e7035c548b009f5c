"""Hosts: a Host Agent registers its inventory; hosts, clients and admins read the fleet
(specs/protocol.md, Hosts). A host reads only itself."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response

from amc.adapters.http import access, bodies
from amc.adapters.http.problems import forbidden, invalid, not_found
from amc.adapters.http.routes import Resource
from amc.adapters.http.wire import json_response
from amc.core.commands import RegisterHost
from amc.core.decisions import HostUpdated
from amc.core.records import DeviceSpec


class Hosts(Resource):
    async def put_host(self, request: Request) -> Response:
        principal, raw = await self.scope.begin(request)
        host_id = request.path_params["host_id"]
        access.require_host_or_admin(principal, host_id)
        limits = self.context.settings.limits
        body = bodies.decode_inventory(raw, limits)
        if not host_id or len(host_id) > limits.max_id_length:
            raise invalid(f"host_id: must be 1-{limits.max_id_length} characters")
        devices = tuple(DeviceSpec(serial=d.serial, attributes=d.attributes) for d in body.devices)
        await self.scope.decide(RegisterHost(now=0, host_id=host_id, devices=devices), HostUpdated)
        return json_response(self.context.views.host(self.scope.existing_host(host_id)))

    async def list_hosts(self, request: Request) -> Response:
        principal, _ = await self.scope.begin(request)
        await self.scope.catch_up()
        service = self.context.service
        if principal.role == "host":  # a host reads only itself: its own entry, once it registered
            own = service.host(principal.host)
            hosts = [] if own is None else [own]
        else:
            hosts = service.hosts()
        return json_response({"hosts": [self.context.views.host(h) for h in hosts]})

    async def get_host(self, request: Request) -> Response:
        principal, _ = await self.scope.begin(request)
        host_id = request.path_params["host_id"]
        if principal.role == "host" and principal.host != host_id:
            raise forbidden("a host reads only itself")
        await self.scope.catch_up()
        host = self.context.service.host(host_id)
        if host is None:
            raise not_found(f"no host {host_id!r}")
        return json_response(self.context.views.host(host))
