"""`Service.watch`: every commit's changed records, once each, after the commit, in commit
order, for the in-memory and the durable service alike (the event stream is built on it)."""

from __future__ import annotations

import threading

import pytest

from amc.core.commands import CancelTask, ClaimTask, RegisterHost, SubmitTask
from amc.core.records import DeviceSpec
from amc.service import Change, ManualClock, MemoryService
from tests.support.plans import PLAN_RECORD as PLAN
from tests.support.postgres import pg_cluster, pg_url  # noqa: F401  (fixtures)
from tests.support.waiting import eventually

T0 = 1_800_000_000_000


def _services():
    kinds = ["memory"]
    try:
        import amc.adapters.lmdb  # noqa: F401

        kinds.append("lmdb")
    except ImportError:
        pass
    return [*kinds, "postgres"]


@pytest.fixture(params=_services())
def service(request, tmp_path):
    if request.param == "memory":
        yield MemoryService(ManualClock(T0))
        return
    if request.param == "postgres":  # skipped, with the reason, where PostgreSQL is missing
        from amc.adapters.postgres import PostgresService

        with PostgresService.open(request.getfixturevalue("pg_url"), clock="manual") as shared:
            yield shared
        return
    from amc.adapters.lmdb import LmdbService

    with LmdbService.open(tmp_path / "store", clock="manual") as durable:
        yield durable


def execute(service, command):
    return service.execute_sync(command)


def test_each_commit_tells_its_changed_records_as_they_stand_after_it(service):
    heard: list[Change] = []
    done = threading.Event()

    def listen(change: Change) -> None:
        heard.append(change)
        if len(heard) == 4:
            done.set()

    stop = service.watch(listen)
    execute(service, SubmitTask(now=0, task_id="t1", tenant="acme", plan=PLAN))
    execute(service, RegisterHost(now=0, host_id="h1", devices=(DeviceSpec(serial="d1", attributes={}),)))
    execute(service, ClaimTask(now=0, host_id="h1", lease_id="l1", lease_ms=30_000))
    execute(service, ClaimTask(now=0, host_id="h1", lease_id="l2", lease_ms=30_000))  # nothing to claim: no change
    execute(service, CancelTask(now=0, task_id="t1", tenant="acme"))
    assert done.wait(5)
    assert [([t.status for t in c.tasks], [h.id for h in c.hosts]) for c in heard] == [
        (["queued"], []),
        ([], ["h1"]),
        (["assigned"], ["h1"]),  # the task claimed, and the host's device reserved
        (["assigned"], []),  # a cancel of an assigned task is pending until its host hears of it
    ]
    assert heard[2].hosts[0].devices[0].reservation is not None
    assert heard[-1].tasks[0] == service.task("t1") and heard[2].hosts[0] == service.host("h1")
    # After stop, nothing more is told
    stop()
    execute(service, SubmitTask(now=0, task_id="t2", tenant="acme", plan=PLAN))
    assert len(heard) == 4


def test_a_failing_listener_fails_no_command_and_no_other_listener(service, caplog):
    heard: list[Change] = []

    def broken(change: Change) -> None:
        raise RuntimeError("a listener's bug")

    service.watch(broken)
    service.watch(heard.append)
    decision = execute(service, SubmitTask(now=0, task_id="t1", tenant="acme", plan=PLAN))
    assert decision.rejection is None and service.task("t1") is not None
    eventually(lambda: heard, what="the change, after the commit (on the writer thread for a durable store)")
    assert [c.tasks[0].id for c in heard] == ["t1"]
    assert "a change listener failed" in caplog.text
