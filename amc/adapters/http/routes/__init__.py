"""The endpoints, by resource.

`tasks` (and their messages), `hosts`, `attempts` (a host's claim, start, renewals, result,
release and acknowledgements), `sessions`, `artifacts`, `events` (the stream), `admin`
(health, metrics, the manual clock) and `console`. Each endpoint decodes (`bodies`), checks
and decides through the request scope (`scope`), and encodes the reply (`wire`, `views`);
`amc.adapters.http.app` puts their routes in order.
"""

from __future__ import annotations

from amc.adapters.http.context import Context
from amc.adapters.http.scope import Scope


class Resource:
    """The endpoints of one resource, over the server's shared parts and the request scope."""

    def __init__(self, context: Context, scope: Scope):
        self.context = context
        self.scope = scope
