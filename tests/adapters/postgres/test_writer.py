"""The PostgreSQL writer decides ahead of its commits: nothing of that may show early.

The writer decides the next commands while the previous batch commits (writer.py), so its
state runs ahead of what is durable. These tests hold a commit on its way and look at what
callers see meanwhile: no reply (a refusal included) before the commit it rests on, nothing
decided after a failed commit ever written, a command that breaks the kernel failing
alone, as in the LMDB store, and many callers each answered only once their command is in.
"""

from __future__ import annotations

import asyncio
import threading
import time
from concurrent.futures import Future

import psycopg
import pytest

from amc.adapters.batches import Work
from amc.adapters.postgres import PostgresService
from amc.adapters.postgres.commits import CommitConnection
from amc.adapters.postgres.verify import verify
from amc.core.commands import CancelTask
from amc.service import NotLeader, TaskQuery
from tests.adapters.lmdb.test_service import check_a_kernel_bug_fails_alone, submit
from tests.adapters.postgres.helpers import writer_state
from tests.support.waiting import eventually


class HeldCommits:
    """After `hold()`, the next commit waits for `release()`, then goes on or, when `fail` is
    set, fails with it; the commits after it are not touched."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch):
        self.gate = threading.Event()
        self.arrived = threading.Event()
        self.fail: BaseException | None = None
        self.holding = False
        original = CommitConnection.execute

        async def execute(commits: CommitConnection, params):
            if self.holding:
                self.holding = False
                self.arrived.set()
                await asyncio.to_thread(self.gate.wait)
                if self.fail is not None:
                    raise self.fail
            return await original(commits, params)

        monkeypatch.setattr(CommitConnection, "execute", execute)

    def hold(self) -> None:
        self.holding = True

    def release(self) -> None:
        self.gate.set()

    def __enter__(self) -> HeldCommits:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.holding = False
        self.release()  # never leave a writer waiting: its service could not close


def send(service: PostgresService, command) -> Future:
    """Queue `command` on the writer without waiting for it."""
    future: Future = Future()
    writer = service._writer
    assert writer is not None
    writer.submit(Work(command, future))
    return future


def test_a_reply_waits_for_the_commit_it_rests_on(pg_url, monkeypatch):
    with HeldCommits(monkeypatch) as held, PostgresService.open(pg_url) as service:
        held.hold()
        first = send(service, submit("t1"))
        assert held.arrived.wait(5)  # t1's commit is on its way, and held
        cancel = send(service, CancelTask(now=0, task_id="t1", tenant="acme"))
        eventually(lambda: writer_state(service).tasks["t1"].status == "cancelled", what="the cancel decided")
        again = send(service, submit("t1", tenant="other"))  # refused, alone: the id is taken (by t1, uncommitted)
        time.sleep(0.3)  # time to decide it
        assert not (first.done() or cancel.done() or again.done())
        assert service.task("t1") is None  # nothing of it is durable yet
        held.release()
        assert first.result(5).accepted and cancel.result(5).accepted
        assert not again.result(5).accepted
        assert service.task("t1").status == "cancelled"
    assert verify(pg_url) == []


def test_nothing_decided_after_a_failed_commit_is_written(pg_url, monkeypatch):
    with HeldCommits(monkeypatch) as held, PostgresService.open(pg_url, poll_s=0.05) as service:
        service.execute_sync(submit("before"))
        held.hold()
        doomed = send(service, submit("t1"))
        assert held.arrived.wait(5)
        after = send(
            service, CancelTask(now=0, task_id="t1", tenant="acme")
        )  # decided on top of t1's uncommitted submit
        eventually(lambda: "t1" in writer_state(service).tasks, what="t1 decided")
        held.fail = psycopg.OperationalError("the connection broke")
        held.release()
        with pytest.raises(NotLeader):
            doomed.result(5)
        with pytest.raises(NotLeader):
            after.result(5)
        assert service.wait_leading(5)  # a new term, loaded from what was committed
        assert service.task("t1") is None and "t1" not in writer_state(service).tasks
        assert service.execute_sync(submit("t2")).accepted
        assert [task.id for task in service.tasks(TaskQuery(limit=10)).tasks] == ["before", "t2"]
    with psycopg.connect(pg_url) as conn:
        assert conn.execute("SELECT count(*) FROM amc_events").fetchone() == (2,)
    assert verify(pg_url) == []


def test_a_command_that_breaks_the_kernel_fails_alone(pg_url, monkeypatch):
    """As in the LMDB store; here the reload waits for the commits decided before it."""
    with PostgresService.open(pg_url) as service:
        check_a_kernel_bug_fails_alone(service, lambda task_id: task_id in writer_state(service).tasks, monkeypatch)
    assert verify(pg_url) == []


def test_many_callers_each_answered_once_their_commit_is_in(pg_url):
    """32 callers, 20 commands each: the writer splits their rounds across commits (one
    commits while the next is decided); every reply is a command that is in the store."""
    sizes: list[int] = []
    with PostgresService.open(pg_url, on_commit=lambda n, s: sizes.append(n)) as service:

        async def caller(c: int) -> None:
            for n in range(20):
                assert (await service.execute(submit(f"t{c}-{n}"))).accepted
                assert service.task(f"t{c}-{n}") is not None  # answered only once durable

        async def main() -> None:
            await asyncio.gather(*(caller(c) for c in range(32)))

        asyncio.run(main())
        assert len(service.tasks(TaskQuery(limit=1000)).tasks) == 640
    assert sum(sizes) == 640  # counted once the service closed: on_commit runs after the replies
    assert verify(pg_url) == []
