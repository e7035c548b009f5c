"""`PostgresService` against the reference `MemoryService` (the contract the LMDB store passes,
tests/adapters/lmdb/test_service.py), and its leadership: one leader, fenced by the epoch."""

from __future__ import annotations

import threading

import psycopg
import pytest

from amc.adapters.postgres import PostgresService
from amc.adapters.postgres.verify import verify
from amc.core.commands import CancelTask, RegisterHost, SubmitTask
from amc.core.errors import InvalidRequest
from amc.core.records import DeviceSpec
from amc.service import MemoryService, NotLeader, TaskQuery
from tests.adapters.lmdb.test_service import (
    check_answers_like_the_memory_service,
    check_pages_and_cursors,
    submit,
)
from tests.adapters.postgres.helpers import advance_clock, writer_state
from tests.support.waiting import eventually

FAST = {"poll_s": 0.1, "lease_s": 2.0}


@pytest.mark.parametrize("seed", [1, 2])
def test_answers_like_the_memory_service_across_restarts(pg_url, seed):
    """As the LMDB store; a restart is a new term that loads the records."""
    check_answers_like_the_memory_service(
        lambda: PostgresService.open(pg_url, clock="manual"), lambda: verify(pg_url), writer_state, advance_clock, seed
    )


def test_pages_and_ids_as_the_lmdb_store(pg_url):
    with PostgresService.open(pg_url) as store:
        check_pages_and_cursors(store)
        assert store.tasks(TaskQuery(limit=10, tenant="x\x00")).tasks == [] and store.task("t\x00") is None
        with pytest.raises(InvalidRequest):
            store.execute_sync(SubmitTask(now=0, task_id="a\x00b", tenant="acme", plan=submit("x").plan))
        with pytest.raises(InvalidRequest):
            store.execute_sync(RegisterHost(now=0, host_id="h" * 256, devices=()))
        store.execute_sync(RegisterHost(now=0, host_id="hb", devices=(DeviceSpec(serial="s1"),)))
        store.execute_sync(RegisterHost(now=0, host_id="hA", devices=()))
        assert [h.id for h in store.hosts()] == ["hA", "hb"]  # code point order, as LMDB


def test_a_second_server_stands_by_and_takes_over_when_the_leader_closes(pg_url):
    first = PostgresService.open(pg_url, **FAST)
    second = PostgresService.open(pg_url, **FAST)
    try:
        assert first.leading and not second.leading
        first.execute_sync(submit("t1"))
        with pytest.raises(NotLeader):
            second.execute_sync(submit("t2"))
        assert second.next_expiry() is None
        first.close()
        assert second.wait_leading(5)
        assert second.epoch == 2
        assert second.task("t1") is not None
        second.execute_sync(submit("t2"))
        assert [t.id for t in second.tasks(TaskQuery(limit=10)).tasks] == ["t1", "t2"]
    finally:
        first.close()
        second.close()
    assert verify(pg_url) == []


@pytest.mark.req("HA")
def test_a_deposed_leader_commits_nothing_and_stands_by(pg_url):
    leader = PostgresService.open(pg_url, poll_s=60, lease_s=30)  # no heartbeat: only the epoch check stops it
    try:
        leader.execute_sync(submit("t1"))
        with psycopg.connect(pg_url, autocommit=True) as conn:  # another server took over
            conn.execute("UPDATE amc_leadership SET epoch = epoch + 1")
        with pytest.raises(NotLeader):
            leader.execute_sync(submit("t2"))
        assert not leader.leading
        with pytest.raises(NotLeader):
            leader.execute_sync(submit("t3"))
        with psycopg.connect(pg_url) as conn:
            assert conn.execute("SELECT id FROM amc_tasks").fetchall() == [("t1",)]
            assert conn.execute("SELECT count(*) FROM amc_events").fetchone() == (1,)
    finally:
        leader.close()


@pytest.mark.req("HA/s4")
def test_a_cut_connection_ends_the_term_and_a_standby_leads(pg_url):
    first = PostgresService.open(pg_url, name="first", **FAST)
    second = PostgresService.open(pg_url, name="second", poll_s=0.05, lease_s=2.0)
    try:
        first.execute_sync(submit("t1"))
        with psycopg.connect(pg_url, autocommit=True) as conn:  # every connection of the first server
            cut = conn.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name LIKE 'amc first %'"
            ).fetchall()
            assert len(cut) >= 3  # the leader lock, the writer, the reads
        eventually(lambda: not first.leading, timeout=5, what="the first server to notice it lost the lock")
        eventually(lambda: first.leading or second.leading, timeout=5, what="a new leader")
        leader = first if first.leading else second
        assert leader.epoch == 2
        leader.execute_sync(submit("t2"))
    finally:
        first.close()
        second.close()
    assert verify(pg_url) == []


def test_concurrent_callers_share_commits(pg_url):
    commits = []
    with PostgresService.open(pg_url, on_commit=lambda n, s: commits.append(n)) as store:
        threads = [threading.Thread(target=lambda i=i: store.execute_sync(submit(f"t{i}"))) for i in range(40)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert sum(commits) == 40
        assert len(store.tasks(TaskQuery(limit=100)).tasks) == 40
    assert verify(pg_url) == []


def test_pages_newest_first_and_by_label_as_the_memory_service(pg_url, monkeypatch):
    from amc.service import port

    monkeypatch.setattr(port, "LABEL_SCAN_LIMIT", 5)  # small, so pages end at the bound
    memory = MemoryService()
    with PostgresService.open(pg_url) as store:
        for i in range(23):
            command = submit(f"t{i}", tenant="acme" if i % 3 else "beta", labels={"kind": "a" if i % 4 else "b"})
            store.execute_sync(command)
            memory.execute_sync(command)
        store.execute_sync(CancelTask(now=0, task_id="t5", tenant=None))
        memory.execute_sync(CancelTask(now=0, task_id="t5", tenant=None))

        def pages(service, **options):
            found, query = [], TaskQuery(limit=3, **options)
            while query is not None:
                page = service.tasks(query)
                found.append(([t.id for t in page.tasks], page.next))
                query = query.following(page)
            return found

        for newest_first in (False, True):
            for label in (None, ("kind", "b"), ("kind", "nothing")):
                mine = pages(store, newest_first=newest_first, label=label)
                assert mine == pages(memory, newest_first=newest_first, label=label), (newest_first, label)
        assert store.status_counts() == memory.status_counts()
