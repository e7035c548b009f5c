"""Prometheus metrics of one server: commands, tasks, leases and the store's commits.

Each app gets its own `CollectorRegistry`, so several servers in one process (tests) do
not collide. Counts of tasks by status and of active leases are read from the service at
scrape time rather than kept by the edge, so they are right after a restart too.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from amc.core import commands
from amc.core.lifecycle import ACTIVE_STATUSES, TaskStatus
from amc.service import Service

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
COMMAND_NAMES = {cls: name for name, cls in commands.NAMES.items()}

_LATENCY_BUCKETS = (0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0)
_BATCH_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024)


class _StateCollector(Collector):
    def __init__(self, service: Service):
        self._service = service

    def collect(self) -> Iterator[GaugeMetricFamily]:
        leading = self._service.leading
        yield GaugeMetricFamily("amc_leader", "1 while this server leads, 0 while it stands by.", value=int(leading))
        if not leading:
            return  # a standby holds no state; the leader's own metrics count the tasks
        counts = self._service.status_counts()
        tasks = GaugeMetricFamily("amc_tasks", "Tasks by status.", labels=["status"])
        for status in TaskStatus:
            tasks.add_metric([status], counts.get(status, 0))
        yield tasks
        # An active attempt exists exactly in the active statuses (specs/design.md, invariant 1).
        yield GaugeMetricFamily(
            "amc_active_leases", "Active leases.", value=sum(counts.get(status, 0) for status in ACTIVE_STATUSES)
        )


class _RuntimeCollector(Collector):
    """What a slow leak would grow: the event loop's tasks and the event stream's readers
    (read at scrape time; the scrape runs on the server's loop)."""

    def __init__(self, readers: Callable[[], int]):
        self._readers = readers

    def collect(self) -> Iterator[GaugeMetricFamily]:
        try:
            tasks = len(asyncio.all_tasks())
        except RuntimeError:  # scraped off the loop (a test's direct call): nothing to count
            tasks = 0
        yield GaugeMetricFamily("amc_asyncio_tasks", "Tasks of the server's event loop.", value=tasks)
        yield GaugeMetricFamily("amc_event_stream_readers", "Open GET /v1/events streams.", value=self._readers())


class Metrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self.commands = Counter(
            "amc_commands",
            "Commands executed, by type and outcome (accepted or the rejection code).",
            ["type", "outcome"],
            registry=self.registry,
        )
        self.command_seconds = Histogram(
            "amc_command_seconds",
            "Time from submitting a command to the service until it is durable.",
            ["type"],
            buckets=_LATENCY_BUCKETS,
            registry=self.registry,
        )
        self.commit_batch = Histogram(
            "amc_commit_batch_size",
            "Commands per store commit (group commit).",
            buckets=_BATCH_BUCKETS,
            registry=self.registry,
        )
        self.commit_seconds = Histogram(
            "amc_commit_seconds",
            "Duration of one store commit.",
            buckets=_LATENCY_BUCKETS,
            registry=self.registry,
        )
        self._children: dict[tuple[type, str], Counter] = {}
        self._timers: dict[type, Histogram] = {}
        self._service_bound = False
        self._runtime_bound = False

    def bind(self, service: Service) -> None:
        """Report the service's task and lease counts (once per registry)."""
        if not self._service_bound:
            self.registry.register(_StateCollector(service))
            self._service_bound = True

    def bind_runtime(self, readers: Callable[[], int]) -> None:
        """Report the event loop's tasks and the event stream's `readers()` (once per registry)."""
        if not self._runtime_bound:
            self.registry.register(_RuntimeCollector(readers))
            self._runtime_bound = True

    def command(self, command_type: type, outcome: str, seconds: float) -> None:
        # Resolving labelled children is the costly part of an observation: cache them.
        key = (command_type, outcome)
        child = self._children.get(key)
        if child is None:
            child = self._children[key] = self.commands.labels(COMMAND_NAMES.get(command_type, "other"), outcome)
        child.inc()
        timer = self._timers.get(command_type)
        if timer is None:
            timer = self._timers[command_type] = self.command_seconds.labels(COMMAND_NAMES.get(command_type, "other"))
        timer.observe(seconds)

    def on_commit(self, batch_size: int, seconds: float) -> None:
        """The store's commit hook (`LmdbService.open(on_commit=...)`); may run on any thread."""
        self.commit_batch.observe(batch_size)
        self.commit_seconds.observe(seconds)

    def exposition(self) -> bytes:
        return generate_latest(self.registry)
