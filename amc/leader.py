"""Several server URLs, and which of them to talk to: following the leader (specs/protocol.md
"High availability", HA/s5 to HA/s8).

Several `amc serve` processes may share one store, one of them the leader; the others are
standbys, which refuse every request with 503 `not_leader` (and their health with 503
`{"status": "standby"}`). A client is given all their URLs (`--server A,B,C`, or `AMC_URL`
with commas) and keeps using the one that last answered as the leader (`current`).

Both the Host Agent (`amc.agent.client`, async) and the CLI (`amc.cli.client`, sync, which
MCP's tools use too) follow the same rules, written here once, without IO, so the two cannot
drift apart; this module stands beside both, so neither client imports the other's package:

- One request goes round the URLs at most once, starting at `current` (`round()`).
- A URL is passed over (`passed_over`), and the same request goes on to the next one at
  once, when the request certainly had no effect there: the connection was refused or
  never made (`never_sent`), or the server answered that it is not the leader
  (`is_standby`). Both are safe to repeat elsewhere for any request, even one that is not
  idempotent, because nothing was done.
- When the request may have been delivered (a timeout or a connection cut after it was
  sent), the URL is passed over as well (a leader that stopped answering is the likeliest
  cause), but the request itself is not sent anywhere else by this module: the caller
  decides under its own rules for uncertain delivery (the agent resends identical bodies,
  which every host endpoint accepts; the CLI resends only idempotent requests).
- Any other answer, a refusal included, comes from the leader: it becomes `current`
  (`answered`) and the backoff starts over.
- The URL that answered as the leader last is `leader` (None before any answer); when an
  answer comes from another URL than the previous leader's, `on_change(old, new)` is told
  once: a client logs "leader changed from A to B" (LEADER/s3), not an outage.
- A round in which no server answered as the leader (`no_leader`) starts a pause that every
  request shares (`wait_seconds`): the longer of the backoff (doubling from `backoff[0]` up to
  `backoff[1]`) and the largest `Retry-After` a standby gave, never more than
  `max_pause` seconds. It avoids hammering servers that are electing a leader.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable

DEFAULT_BACKOFF = (0.1, 2.0)  # seconds: first and longest pause after a round found no leader
MAX_PAUSE = 5.0  # seconds: the longest Retry-After honoured; a failover takes about that long


def parse_urls(text: str | Iterable[str]) -> tuple[str, ...]:
    """The URLs of ``"http://a:8000, http://b:8000"`` (or of a list of such strings), in order,
    without trailing slashes or repeats. ValueError if there is none."""
    pieces = [text] if isinstance(text, str) else list(text)
    urls: list[str] = []
    for piece in pieces:
        for url in piece.split(","):
            url = url.strip().rstrip("/")
            if url and url not in urls:
                urls.append(url)
    if not urls:
        raise ValueError("no server URL given")
    return tuple(urls)


def is_standby(status: int, body: bytes) -> bool:
    """Whether an answer says "not the leader": 503 with the problem code `not_leader`, or
    the standby's health answer `{"status": "standby"}`."""
    if status != 503:
        return False
    try:
        document = json.loads(body)
    except ValueError:
        return False
    return isinstance(document, dict) and (document.get("code") == "not_leader" or document.get("status") == "standby")


def retry_after(value: str | None) -> float | None:
    """The seconds of a `Retry-After: <seconds>` header; None when absent or not a number (an
    HTTP date is not worth a clock comparison here: the pause is bounded anyway)."""
    if value is None:
        return None
    try:
        seconds = float(value.strip())
    except ValueError:
        return None
    return seconds if seconds >= 0 else None


def never_sent(error: BaseException) -> bool:
    """Whether an httpx error happened before any byte of the request left: the connection
    was refused or could not be made, or no pooled connection was free. Such a request had
    no effect, so it may go to another server whatever it is."""
    import httpx  # here: the CLI imports this module for `--help`, which must stay cheap

    return isinstance(
        error,
        (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout, httpx.UnsupportedProtocol, httpx.InvalidURL),
    )


class Endpoints:
    """The server URLs of one client, in the order given, and the one in use.

    Shared by every request of the client (the agent's many concurrent calls, or a CLI
    command's calls one after another); only touched from one thread or event loop.

    Args:
        urls: the URLs, in the order to try them (`parse_urls`).
        backoff: first and longest pause, in seconds, after a round that found no leader.
        max_pause: the longest pause a standby's `Retry-After` can ask for.
        clock: a monotonic clock in seconds (tests pass their own).
        on_change: called with the old and the new leader's URL when another URL than the
            previous leader's answers as the leader (not for the first answer).
    """

    def __init__(
        self,
        urls: Iterable[str],
        *,
        backoff: tuple[float, float] = DEFAULT_BACKOFF,
        max_pause: float = MAX_PAUSE,
        clock: Callable[[], float] = time.monotonic,
        on_change: Callable[[str, str], object] | None = None,
    ):
        self.urls = parse_urls(urls)
        self._index = 0
        self._backoff = backoff
        self._delay = backoff[0]
        self._max_pause = max_pause
        self._clock = clock
        self._quiet_until = 0.0
        self.leader: str | None = None  # the URL that answered as the leader last
        self.lost_since: float | None = None  # since when no round found a leader (None: one answers)
        self.on_change = on_change

    @property
    def current(self) -> str:
        """The URL that answered as the leader last (at first, the first one given)."""
        return self.urls[self._index]

    def round(self) -> list[str]:
        """The URLs one request may try, each once: `current` first, then the others in order."""
        return [*self.urls[self._index :], *self.urls[: self._index]]

    def answered(self, url: str) -> None:
        """`url` answered as the leader: it is the one to use, and the backoff starts over."""
        self._index = self.urls.index(url)
        self._delay = self._backoff[0]
        self._quiet_until = 0.0
        old, self.leader = self.leader, url
        self.lost_since = None
        if old is not None and old != url and self.on_change is not None:
            self.on_change(old, url)

    def passed_over(self, url: str) -> None:
        """`url` is not the leader, or did not answer: use the next one. A no-op when another
        request has already moved past it."""
        if self.current == url:
            self._index = (self._index + 1) % len(self.urls)

    def no_leader(self, retry_after: float | None = None) -> float:
        """A whole round found no leader; the pause every request now waits out, in seconds."""
        if self.lost_since is None:
            self.lost_since = self._clock()
        pause = min(self._max_pause, max(self._delay, retry_after or 0.0))
        self._delay = min(self._delay * 2, self._backoff[1])
        self._quiet_until = max(self._quiet_until, self._clock() + pause)
        return pause

    def wait_seconds(self) -> float:
        """How long a request should wait before its round (0 unless a pause is running)."""
        return max(0.0, self._quiet_until - self._clock())

    def __str__(self) -> str:
        return ", ".join(self.urls)
