"""Servers broken at the HTTP edge, one protocol rule each, for the suite to catch.

`tools/mutation_check.py` breaks rules of the kernel; these break rules that only the edge
(amc/adapters/http) keeps: the six that an earlier version of the suite let pass when it
was run against an independent server. They use the same mechanism (a scratch copy of the
repository with one textual edit, `mutated_copy`), but are kept apart from its MUTANTS:
that script runs the model tests, which never reach the HTTP edge.

Each entry has the format of `tools.mutation_check.MUTANTS`: name -> [(file, text to find,
replacement)], where the text occurs exactly once in the file.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from unittest import mock

HTTP_MUTANTS: dict[str, list[tuple[str, str, str]]] = {
    # The standard library's parser reads NaN and Infinity as floats; orjson refuses them.
    "nan-and-infinity-accepted": [(
        "amc/adapters/http/bodies.py",
        '''        return orjson.loads(raw)''',
        '''        return __import__("json").loads(raw)''',
    )],
    "submit-body-checked-before-the-token": [(
        "amc/adapters/http/app.py",
        '''        principal, raw = await self.begin(request)
        access.require_role(principal, "client", "admin")
        body, plan = bodies.decode_submit(''',
        '''        bodies.decode_submit(await self._read_body(request), self.settings.limits, may_name_tenant=True)
        principal, raw = await self.begin(request)
        access.require_role(principal, "client", "admin")
        body, plan = bodies.decode_submit(''',
    )],
    "listing-limit-capped-at-100": [(
        "amc/adapters/http/bodies.py",
        '''    return status, int(text), after''',
        '''    return status, min(int(text), 100), after''',
    )],
    "wrong-method-answered-404": [(
        "amc/adapters/http/app.py",
        '''        return await on_http(request, exc)''',
        '''        return await on_http(request, HTTPException(404))''',
    )],
    "host-listing-a-bare-list": [(
        "amc/adapters/http/app.py",
        '''        return json_response({"hosts": [wire.host_view(h) for h in hosts]})''',
        '''        return json_response([wire.host_view(h) for h in hosts])''',
    )],
    "host-lists-every-host": [(
        "amc/adapters/http/app.py",
        '''        if principal.role == "host":  # a host reads only itself''',
        '''        if False:  # a host reads only itself''',
    )],
}


@contextlib.contextmanager
def broken_copy(name: str) -> Iterator[Path]:
    """A scratch copy of the repository with HTTP mutant `name` applied (see `mutated_copy`)."""
    from tools import mutation_check

    with mock.patch.dict(mutation_check.MUTANTS, HTTP_MUTANTS), mutation_check.mutated_copy(name) as copy:
        yield copy
