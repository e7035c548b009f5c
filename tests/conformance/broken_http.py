"""Servers broken at the HTTP edge, one protocol rule each, for the suite to catch.

`tools/mutation_check.py` breaks rules of the kernel; these break rules that only the edge
(amc/adapters/http) keeps: the six that an earlier version of the suite let pass when it
was run against an independent server. They use the same mechanism (a scratch copy of the
repository with one textual edit, `mutated_copy`), but are kept apart from its MUTANTS:
that script runs the model tests, which never reach the HTTP edge.

Each entry has the format of `tools.mutation_check.MUTANTS`: name -> [Edit(module, function,
snippet, replacement)], the snippet occurring exactly once in that function.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from unittest import mock

from tools.mutation_check import Edit

HTTP_MUTANTS: dict[str, list[Edit]] = {
    # The standard library's parser reads NaN and Infinity as floats; orjson refuses them.
    "nan-and-infinity-accepted": [
        Edit(
            "amc.adapters.http.bodies",
            "parse_json",
            """return orjson.loads(raw)""",
            """return __import__("json").loads(raw)""",
        )
    ],
    "submit-body-checked-before-the-token": [
        Edit(
            "amc.adapters.http.routes.tasks",
            "Tasks.submit",
            """
        principal, raw = await self.scope.begin(request, access.CLIENT_OR_ADMIN)
        """,
            """
        early = await request.body()
        if len(early) <= self.context.settings.limits.max_body_bytes:  # a body too large is still 413 first
            bodies.decode_submit(early, self.context.settings.limits, may_name_tenant=True)
        principal, raw = await self.scope.begin(request, access.CLIENT_OR_ADMIN)
        """,
        )
    ],
    "listing-limit-capped-at-100": [
        Edit(
            "amc.adapters.http.bodies",
            "decode_list_query",
            """return ListQuery(status, int(text), after""",
            """return ListQuery(status, min(int(text), 100), after""",
        )
    ],
    "wrong-method-answered-404": [
        Edit(
            "amc.adapters.http.scope",
            "Scope.unrouted",
            """return await on_http(request, exc)""",
            """return await on_http(request, HTTPException(404))""",
        )
    ],
    "host-listing-a-bare-list": [
        Edit(
            "amc.adapters.http.routes.hosts",
            "Hosts.list_hosts",
            """return json_response({"hosts": [self.context.views.host(h) for h in hosts]})""",
            """return json_response([self.context.views.host(h) for h in hosts])""",
        )
    ],
    "host-lists-every-host": [
        Edit(
            "amc.adapters.http.routes.hosts",
            "Hosts.list_hosts",
            """if principal.role == "host":""",
            """if False:""",
        )
    ],
}


@contextlib.contextmanager
def broken_copy(name: str) -> Iterator[Path]:
    """A scratch copy of the repository with HTTP mutant `name` applied (see `mutated_copy`)."""
    from tools import mutation_check

    with mock.patch.dict(mutation_check.MUTANTS, HTTP_MUTANTS), mutation_check.mutated_copy(name) as copy:
        yield copy
