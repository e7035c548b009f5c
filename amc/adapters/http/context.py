"""What the endpoints of one server share, and the one way a command goes through it.

A `Context` is built once per app and handed to every resource's endpoints (`routes`). It
holds the server's parts (the service, its settings, tokens, metrics, blob store and input records) and
what the server keeps from moment to moment beside the store: host liveness, attempt
progress, the long-poll signals, the expiry timer and the event stream. `run` is the path
of every command: execute it, count it, and tell the waiters and the timer what changed.
"""

from __future__ import annotations

import time

from amc.adapters.http.auth import Authenticator
from amc.adapters.http.eventstream import EventStream
from amc.adapters.http.liveness import HostLiveness, ProgressBoard
from amc.adapters.http.longpoll import ClaimWaits, TaskSignals, WorkSignal
from amc.adapters.http.metrics import Metrics
from amc.adapters.http.settings import Settings
from amc.adapters.http.timer import ExpiryTimer
from amc.adapters.http.views import Views
from amc.core.commands import Command
from amc.core.decisions import Decision
from amc.core.events import ActionEnded, TaskAssigned
from amc.service import BlobStore, InputCatalogue, Service


class Context:
    """The shared parts of one server, bound to its service, settings, tokens, metrics and blobs."""

    def __init__(
        self,
        service: Service,
        settings: Settings,
        tokens: Authenticator,
        metrics: Metrics,
        blobs: BlobStore,
        inputs: InputCatalogue,
    ):
        self.service = service
        self.settings = settings
        self.tokens = tokens
        self.metrics = metrics
        self.blobs = blobs  # artifacts' and inputs' bytes
        self.inputs = inputs  # which tenant has which input (Part F)
        self.signal = WorkSignal()  # waiting claims
        self.claim_waits = ClaimWaits(settings.max_waiting_claims, settings.max_waiting_claims_per_host)
        self.task_signals = TaskSignals()  # Part D: polls and waits on one task
        self.timer = ExpiryTimer(service, self.run)
        self.liveness = HostLiveness(service.clock, round(settings.host_timeout_seconds * 1000))
        self.progress = ProgressBoard()
        self.views = Views(service, self.liveness, self.progress)
        self.events = EventStream(self.views.task, self.views.host, self.liveness.online, settings.events)

    async def run(self, command: Command) -> Decision:
        """Execute `command`, count it, and tell the long polls and the timer what changed."""
        started = time.perf_counter()
        decision = await self.service.execute(command)
        outcome = "accepted" if decision.rejection is None else decision.rejection.code.name
        self.metrics.command(type(command), outcome, time.perf_counter() - started)
        if decision.events:
            self.signal.notify_if_waking(decision.events)
            self.task_signals.notify(decision.events)
            # Only a new lease can make the earliest expiry earlier: a start or a renewal
            # moves its lease later, and an expiry or a report removes one.
            # A session's idle deadline likewise only comes nearer by a claim or an action's end.
            if any(isinstance(event, (TaskAssigned, ActionEnded)) for event in decision.events):
                self.timer.poke()
        return decision

    def drain(self) -> None:
        """The server is stopping: let every waiting claim and poll answer now, and end every event stream."""
        self.signal.close()
        self.task_signals.close()
        self.events.close()
