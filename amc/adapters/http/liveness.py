"""Host liveness and attempt progress: what the server knows of its hosts from moment to
moment, kept in memory and never recorded (specs/protocol.md "Host liveness", "Progress").

Neither is history: a restart forgets both (hosts read `last_seen_at: null` and offline,
attempts `progress: null`) until the hosts call again, which costs no write per request.
Times are the server's clock (a manual clock moves liveness as it moves leases).
"""

from __future__ import annotations

from collections import OrderedDict

import attrs

from amc.service import Clock


class HostLiveness:
    """When each host last made an authenticated request, and whether that makes it online.

    A host is online while ``now < last_seen_at + timeout``, the way a lease is live while
    ``now < lease_expires_at``.
    """

    def __init__(self, clock: Clock, timeout_ms: int):
        self._clock = clock
        self.timeout_ms = timeout_ms
        self._seen: dict[str, int] = {}  # host id -> server ms; one entry per host token used

    def seen(self, host_id: str) -> None:
        self._seen[host_id] = self._clock.now()

    def known(self) -> list[str]:
        """The hosts seen since the server started (the event stream looks at their liveness)."""
        return list(self._seen)

    def last_seen(self, host_id: str) -> int | None:
        return self._seen.get(host_id)

    def online(self, host_id: str) -> bool:
        last = self._seen.get(host_id)
        return last is not None and self._clock.now() < last + self.timeout_ms


@attrs.frozen
class Progress:
    step: str | None  # the step running now; None between steps
    ended: int  # steps ended in this attempt


class ProgressBoard:
    """The latest progress each attempt's host sent with a start or renewal.

    Bounded: an attempt's entry moves to the back whenever its host sends progress, and the
    oldest entries go first once `capacity` is reached, so only attempts that stopped
    sending long ago (ended ones, in practice) are forgotten.
    """

    def __init__(self, capacity: int = 100_000):
        self.capacity = capacity
        self._latest: OrderedDict[tuple[str, int], Progress] = OrderedDict()

    def record(self, task_id: str, attempt: int, progress: Progress) -> None:
        key = (task_id, attempt)
        self._latest[key] = progress
        self._latest.move_to_end(key)
        while len(self._latest) > self.capacity:
            self._latest.popitem(last=False)

    def of(self, task_id: str, attempt: int) -> Progress | None:
        return self._latest.get((task_id, attempt))
