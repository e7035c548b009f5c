"""The live event stream, `GET /v1/events` (specs/protocol.md Part E): every committed change
of a task or a host, pushed to the readers who may see it, as server-sent events.

Where the events come from. The service tells the app which records each commit changed
(`Service.watch`, a `Change` built from the kernel's journal), after the commit and in
commit order; `EventStream.publish_change` numbers each changed record as one event and
offers it to every subscriber. Hosts going online or offline are not commits (liveness is
time and memory, `liveness.py`): `watch_liveness` looks for them periodically and publishes
the host when its `online` flipped.

What a reader gets. An event is ``id: <run>-<seq>``, ``event: task`` or ``event: host`` and
``data:`` the JSON view `GET /v1/tasks/{id}` or `GET /v1/hosts/{id}` answers. `run` is
random per server start; `seq` counts events within it. The latest `ring_events` events
stay in a ring, so a reader who reconnects with `Last-Event-ID` is sent the ones it missed
(those its scope shows) before the live ones; a reader whose id is of another run, too old
or malformed is sent ``event: reset`` first, meaning "read again what you show".

Cost. Each event is rendered at most once (`Published.frame`), by the first subscriber that
sends it or replays it, never per subscriber: readers of one scope share the bytes. Nothing
is rendered while nobody reads. Rendering when sent (not when committed) also means a
renewal's progress, which the edge records after the command's reply, is in the view.

A slow reader never slows the server: publishing only appends to each subscriber's bounded
queue. A subscriber whose queue is full loses what it holds and is sent a reset instead;
it goes on live from there.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
from collections import deque
from collections.abc import AsyncIterator, Callable
from typing import Any

import orjson
from starlette.responses import StreamingResponse
from starlette.types import Receive, Scope, Send

from amc.adapters.http.settings import EventSettings
from amc.core.records import Host, Task
from amc.service import Change

log = logging.getLogger("amc.http.events")

KEEPALIVE = b": keep-alive\n\n"
KEEPALIVE_HEADER = "amc-keep-alive"  # the seconds between two keep-alives on a quiet stream
REPLAY_CHUNK = 256  # events written to the socket in one piece while replaying


class Published:
    """One event: a record as one commit left it, and its frame once someone rendered it."""

    __slots__ = ("seq", "tenant", "record", "_frame")

    def __init__(self, seq: int, tenant: str | None, record: Task | Host):
        self.seq = seq
        self.tenant = tenant  # the task's tenant; None for a host, which every reader sees
        self.record = record
        self._frame: bytes | None = None


class EventStream:
    """The publisher of one server run: numbers events, keeps the ring, feeds subscribers.

    Everything runs on the server's event loop; `listener` is what a service may call from
    its writer thread.

    Args:
        render_task: the view of a task, as `GET /v1/tasks/{id}` answers it.
        render_host: the view of a host, as `GET /v1/hosts/{id}` answers it.
        online: whether a host reads online now (`HostLiveness.online`).
        settings: the keep-alive interval and the bounds.
    """

    def __init__(
        self,
        render_task: Callable[[Task], dict[str, Any]],
        render_host: Callable[[Host], dict[str, Any]],
        online: Callable[[str], bool],
        settings: EventSettings,
    ):
        self.run = secrets.token_hex(6)  # no "-" in it: the id splits at its last "-"
        self.seq = 0
        self.settings = settings
        self._render_task = render_task
        self._render_host = render_host
        self._is_online = online
        self._prefix = f"id: {self.run}-".encode()
        self._ring: deque[Published] = deque(maxlen=settings.ring_events)
        self._subscribers: set[Subscription] = set()
        self._online: dict[str, bool] = {}  # what the latest host event said, by host id
        self._closed = False

    # -- publishing -----------------------------------------------------------------------

    def listener(self, loop: asyncio.AbstractEventLoop) -> Callable[[Change], None]:
        """A `Service.watch` listener that hands each change to this stream on `loop`, in
        the order the service committed them (a loop runs callbacks in the order given)."""

        def heard(change: Change) -> None:
            try:
                loop.call_soon_threadsafe(self.publish_change, change)
            except RuntimeError:  # the loop is closed: the server has stopped
                pass

        return heard

    def publish_change(self, change: Change) -> None:
        for task in change.tasks:
            self._publish(task.tenant, task)
        for host in change.hosts:
            self._online[host.id] = self._is_online(host.id)
            self._publish(None, host)

    def _publish(self, tenant: str | None, record: Task | Host) -> None:
        self.seq += 1
        item = Published(self.seq, tenant, record)
        self._ring.append(item)
        for subscriber in self._subscribers:
            subscriber.offer(item)

    async def watch_liveness(self, seen: Callable[[], list[str]], host: Callable[[str], Host | None]) -> None:
        """Every `liveness_check_seconds`, publish each registered host whose `online` differs
        from what its latest event said: it went silent past the timeout, or called again.
        `seen` lists the hosts liveness knows of; `host` reads one."""
        while True:
            await asyncio.sleep(self.settings.liveness_check_seconds)
            try:
                for host_id in seen():
                    online = self._is_online(host_id)
                    if self._online.get(host_id, False) != online:
                        self._online[host_id] = online
                        record = host(host_id)
                        if record is not None:
                            self._publish(None, record)
            except Exception:  # a store read failed: try again next time
                log.exception("looking for hosts going online or offline failed")

    # -- rendering ------------------------------------------------------------------------

    def frame(self, item: Published) -> bytes:
        if item._frame is None:
            record = item.record
            if isinstance(record, Task):
                kind, view = b"task", self._render_task(record)
            else:
                kind, view = b"host", self._render_host(record)
            item._frame = b"%s%d\nevent: %s\ndata: %s\n\n" % (self._prefix, item.seq, kind, orjson.dumps(view))
        return item._frame

    def reset_frame(self, seq: int) -> bytes:
        """A reset that stands at event `seq`: a reader who re-read what it shows is caught up
        to there, so its id is where a later reconnection resumes."""
        return b"%s%d\nevent: reset\ndata: {}\n\n" % (self._prefix, seq)

    # -- subscribing ----------------------------------------------------------------------

    def subscribe(self, tenant: str | None, last_event_id: str | None) -> Subscription:
        """A new reader of the events `tenant` may see (None: every tenant's, an admin).

        With `last_event_id`, the reader first gets the events after it, or a reset when
        they are not all in the ring (or the id is of another run, or malformed).
        """
        subscription = Subscription(self, tenant)
        if last_event_id:
            after = self._resumable(last_event_id)
            if after is None:
                subscription.first = [self.reset_frame(self.seq)]
            else:
                subscription.first = [item for item in self._ring if item.seq > after and subscription.sees(item)]
        if self._closed:
            subscription.close()
        else:
            self._subscribers.add(subscription)
        return subscription

    def _resumable(self, last_event_id: str) -> int | None:
        """The seq after which a reader resumes, if every event since is still in the ring."""
        run, _, seq = last_event_id.strip().rpartition("-")
        if run != self.run or not (seq.isascii() and seq.isdigit()):
            return None
        after = int(seq)
        oldest = self._ring[0].seq if self._ring else self.seq + 1
        return after if oldest - 1 <= after <= self.seq else None

    def unsubscribe(self, subscription: Subscription) -> None:
        self._subscribers.discard(subscription)

    @property
    def subscribers(self) -> int:
        return len(self._subscribers)

    def close(self) -> None:
        """The server is stopping: end every stream, so that no reader holds the shutdown up."""
        self._closed = True
        for subscription in list(self._subscribers):
            subscription.close()
        self._subscribers.clear()


class Subscription:
    """One reader: what it is sent first (a replay or a reset), then its bounded live queue."""

    def __init__(self, stream: EventStream, tenant: str | None):
        self.stream = stream
        self.tenant = tenant
        self.first: list[Published | bytes] = []
        self._queue: deque[Published | bytes] = deque()
        self._capacity = stream.settings.queue_events
        self._wake = asyncio.Event()
        self._closed = False
        self.resets = 0  # how often its queue overflowed

    def sees(self, item: Published) -> bool:
        return self.tenant is None or item.tenant is None or item.tenant == self.tenant

    def offer(self, item: Published) -> None:
        if not self.sees(item):
            return
        if len(self._queue) >= self._capacity:
            # Too far behind: what it holds is dropped for a reset (item included), so this
            # reader costs at most `capacity` events of memory however slowly it reads.
            self._queue.clear()
            self._queue.append(self.stream.reset_frame(item.seq))
            self.resets += 1
        else:
            self._queue.append(item)
        self._wake.set()

    def close(self) -> None:
        self._closed = True
        self._wake.set()

    async def frames(self) -> AsyncIterator[bytes]:
        """The bytes to send: the first events, then live ones as they come, a keep-alive
        comment after each quiet `keepalive_seconds`; ends when the stream closes."""
        stream, keepalive = self.stream, self.stream.settings.keepalive_seconds
        try:
            first, self.first = self.first, []
            for start in range(0, len(first), REPLAY_CHUNK):
                yield b"".join(self._bytes(item) for item in first[start : start + REPLAY_CHUNK])
            while True:
                if self._queue:
                    ready, self._queue = self._queue, deque()
                    yield b"".join(self._bytes(item) for item in ready)
                    continue
                if self._closed:
                    return
                self._wake.clear()
                try:
                    await asyncio.wait_for(self._wake.wait(), keepalive)
                except TimeoutError:
                    yield KEEPALIVE
        finally:
            stream.unsubscribe(self)

    def _bytes(self, item: Published | bytes) -> bytes:
        return item if isinstance(item, bytes) else self.stream.frame(item)


class EventStreamResponse(StreamingResponse):
    """The 200 of `GET /v1/events`: `subscription`'s frames, and its end however the response
    ends (finished, the reader gone, cancelled before the first byte)."""

    def __init__(self, subscription: Subscription):
        # The keep-alive interval, said (BOUNDED/s1): a reader that hears nothing for twice
        # this long drops the connection as dead.
        keepalive = subscription.stream.settings.keepalive_seconds
        headers = {"content-type": "text/event-stream", "cache-control": "no-store", KEEPALIVE_HEADER: f"{keepalive:g}"}
        super().__init__(subscription.frames(), headers=headers)
        self.subscription = subscription

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            self.subscription.close()
            self.subscription.stream.unsubscribe(self.subscription)
