"""Tasks and hosts as the server shows them now: the records' wire views (`wire`) with what
the server knows of the moment and does not store (attempt progress, host liveness, and
why a queued task waits)."""

from __future__ import annotations

from typing import Any

from amc.adapters.http import wire
from amc.adapters.http.liveness import HostLiveness, ProgressBoard
from amc.core.lifecycle import TaskStatus
from amc.core.records import Host, Task
from amc.core.waiting import Waiting, waiting
from amc.service import Service

# What why a queued task waits depends on: its serial, its attributes, whether it is held.
WaitingKey = tuple[str | None, tuple[tuple[str, str], ...], bool]


class Views:
    """The views of one server, over its service, its hosts' liveness and its attempts' progress."""

    def __init__(self, service: Service, liveness: HostLiveness, progress: ProgressBoard):
        self._service = service
        self._liveness = liveness
        self._progress = progress

    def task(
        self, task: Task, hosts: list[Host] | None = None, reasons: dict[WaitingKey, Waiting | None] | None = None
    ) -> dict[str, Any]:
        """A task with its attempts' progress and, when queued, why it waits (`hosts`: the
        registered hosts, when the caller already read them; `reasons`: the answers already
        worked out for this read, by what they depend on)."""
        why = None
        if task.status == TaskStatus.queued:
            # Why a task waits depends only on its requirements and whether it is held, and
            # working it out passes over every device: a page of tasks that share their
            # requirements (the usual case) pays for one pass, not one per task.
            requirements = task.requirements
            key = (requirements.serial, tuple(sorted(requirements.attributes.items())), task.held)
            if reasons is not None and key in reasons:
                why = reasons[key]
            else:
                why = waiting(task, self._service.hosts() if hosts is None else hosts, self._liveness.online)
                if reasons is not None:
                    reasons[key] = why
        return wire.task_view(task, progress=self._progress.of, waiting=why)

    def host(self, host: Host) -> dict[str, Any]:
        return wire.host_view(host, self._liveness.last_seen(host.id), self._liveness.online(host.id))
