"""Why a queued task waits (specs/protocol.md "Why a queued task waits").

Computed when a task is read, never recorded: whether a device is online depends on its
host's liveness, which the server keeps in memory, so the caller passes that in as a
predicate. The cost is one pass over the registered devices (the hosts' inventories), and
no task is looked at but the one asked about.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterable

import attrs

from amc.core.lifecycle import TaskStatus
from amc.core.records import Host, Task


class WaitingReason(enum.StrEnum):
    held = "held"  # paused while queued: no claim takes it until a resume
    no_device_matches = "no_device_matches"  # no registered device meets the requirements
    matching_devices_offline = "matching_devices_offline"  # some do; none of them is online
    matching_devices_busy = "matching_devices_busy"  # online ones do, and all are reserved
    ready = "ready"  # an online idle device matches: its host's next claim takes it, in claim order


@attrs.frozen
class Waiting:
    reason: WaitingReason
    matching_devices: int  # registered devices that meet the requirements, online or not


def waiting(task: Task, hosts: Iterable[Host], online: Callable[[str], bool]) -> Waiting | None:
    """Why `task` waits, or None when it is not queued.

    Args:
        task: the task read.
        hosts: every registered host (their devices are the candidates).
        online: whether a host (by id) is online now.
    """
    if task.status != TaskStatus.queued:
        return None
    matching = online_matching = idle = 0
    requirements = task.requirements
    for host in hosts:
        host_online: bool | None = None  # asked once per host, and only if a device matches
        for device in host.devices:
            if not requirements.matches(device.serial, device.attributes):
                continue
            matching += 1
            if host_online is None:
                host_online = online(host.id)
            if host_online and device.online:
                online_matching += 1
                idle += device.reservation is None
    if task.held:
        reason = WaitingReason.held
    elif matching == 0:
        reason = WaitingReason.no_device_matches
    elif online_matching == 0:
        reason = WaitingReason.matching_devices_offline
    elif idle == 0:
        reason = WaitingReason.matching_devices_busy
    else:
        reason = WaitingReason.ready
    return Waiting(reason=reason, matching_devices=matching)
