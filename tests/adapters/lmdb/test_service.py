"""`LmdbService` against the reference `MemoryService`, and the commit path's promises."""

from __future__ import annotations

import asyncio
import random
import threading
import time

import pytest

from amc.adapters import codec
from amc.adapters.lmdb import CommitFailed, LmdbService, StoreClosed, verify
from amc.core import kernel
from amc.core.commands import CancelTask, ClaimTask, ExpireLeases, RegisterHost, StartAttempt, SubmitTask
from amc.core.errors import Code, InvalidRequest
from amc.core.records import DeviceSpec
from amc.service import ManualClock, MemoryService, NoManualClock, TaskQuery
from tests.adapters.lmdb.helpers import advance_clock, writer_state
from tests.adapters.lmdb.workload import HOSTS, TENANTS, Workload
from tests.support.plans import PLAN_RECORD as PLAN

STATUSES = (None, "queued", "assigned", "dispatched", "done", "failed", "cancelled")


def submit(task_id: str, tenant: str = "acme", **kwargs) -> SubmitTask:
    return SubmitTask(now=0, task_id=task_id, tenant=tenant, plan=PLAN, **kwargs)


def all_pages(service, tenant, status, limit):
    pages, query = [], TaskQuery(limit=limit, tenant=tenant, status=status)
    while query is not None:
        pages.append(page := service.tasks(query))
        query = query.following(page)
    return pages


def assert_same_reads(store: LmdbService, memory: MemoryService) -> None:
    for task_id in memory.state.tasks:
        assert store.task(task_id) == memory.task(task_id)
        assert store.history(task_id) == memory.history(task_id)
    assert store.task("no-such-task") is None
    assert store.history("no-such-task") == []
    assert store.hosts() == memory.hosts()
    for host_id in (*HOSTS, "no-such-host"):
        assert store.host(host_id) == memory.host(host_id)
    assert store.next_expiry() == memory.next_expiry()
    assert store.status_counts() == memory.status_counts()
    for tenant in (None, *TENANTS, "nobody"):
        for status in STATUSES:
            assert all_pages(store, tenant, status, 4) == all_pages(memory, tenant, status, 4), (tenant, status)


def advance_memory(memory: MemoryService, ms: int) -> int:
    now = memory.clock.advance(ms)
    memory.execute_sync(ExpireLeases(now=0))
    return now


@pytest.mark.parametrize("seed", [1, 2])
def test_answers_like_the_memory_service_across_restarts(data_dir, seed):
    check_answers_like_the_memory_service(
        lambda: LmdbService.open(data_dir, clock="manual"), lambda: verify(data_dir), writer_state, advance_clock, seed
    )


def check_answers_like_the_memory_service(open_store, verify_store, state_of, advance, seed: int) -> None:
    """600 commands and clock advances of a seeded workload, each answered as the in-memory
    service answers it; every 100 the writer's state and the reads agree, every 200 the
    store restarts (records in, no replay) and verifies. For every store: `open_store()`
    opens it with a manual clock, `state_of(store)` is its writer's state."""
    store = open_store()
    memory = MemoryService(clock=ManualClock(store.clock.now()))
    workload = Workload(seed)
    rng = random.Random(seed)
    try:
        for step in range(1, 601):
            if rng.random() < 0.07:
                ms = rng.choice((500, 2000, 7000))
                assert advance(store, ms) == advance_memory(memory, ms)
            else:
                command = workload.next_command(memory.state)
                assert store.execute_sync(command) == memory.execute_sync(command), command
            if step % 100 == 0:
                assert state_of(store) == memory.state
                assert_same_reads(store, memory)
            if step % 200 == 0:
                store.close()
                assert verify_store() == []
                store = open_store()
                assert store.clock.now() == memory.clock.now()
                assert state_of(store) == memory.state
                assert_same_reads(store, memory)
    finally:
        store.close()
    logged = {type(event) for event in memory.log}
    assert logged == set(codec.EVENT_TAGS.values()), "the workload should produce every event type"


def test_pages_use_opaque_cursors_and_validate_them(data_dir):
    with LmdbService.open(data_dir) as store:
        check_pages_and_cursors(store)
        assert store.tasks(TaskQuery(limit=7)).next is None
        with pytest.raises(InvalidRequest):
            TaskQuery(limit=0)
        assert store.tasks(TaskQuery(limit=10, tenant="x" * 600)).tasks == []


def check_pages_and_cursors(store) -> None:
    """Pages by tenant and status with cursors that only the store reads (for every store)."""
    for i in range(7):
        store.execute_sync(submit(f"t{i}", tenant="acme" if i % 2 == 0 else "beta"))
    store.execute_sync(CancelTask(now=0, task_id="t2", tenant=None))
    first = store.tasks(TaskQuery(limit=2, tenant="acme"))
    assert [t.id for t in first.tasks] == ["t0", "t2"] and first.next is not None
    second = store.tasks(TaskQuery(limit=2, tenant="acme", after=first.next))
    assert [t.id for t in second.tasks] == ["t4", "t6"] and second.next is None
    assert [t.id for t in store.tasks(TaskQuery(limit=10, tenant="acme", status="queued")).tasks] == ["t0", "t4", "t6"]
    assert [t.id for t in store.tasks(TaskQuery(limit=10, status="cancelled")).tasks] == ["t2"]
    for bad in ("x", "-1", "1.5", "", "²"):
        with pytest.raises(InvalidRequest):
            store.tasks(TaskQuery(limit=10, after=bad))


def test_ids_the_store_cannot_key_are_refused_before_the_kernel(data_dir):
    with LmdbService.open(data_dir) as store:
        with pytest.raises(InvalidRequest, match="task_id"):
            store.execute_sync(submit("t" * 300))
        with pytest.raises(InvalidRequest, match="tenant"):
            store.execute_sync(submit("t1", tenant=""))
        with pytest.raises(InvalidRequest, match="host_id"):
            store.execute_sync(RegisterHost(now=0, host_id="h" * 256, devices=()))
        assert store.task("t" * 600) is None and store.task("") is None and store.host("") is None
    assert verify(data_dir) == []


def test_concurrent_callers_share_commits_in_arrival_order(data_dir):
    batches: list[int] = []
    with LmdbService.open(data_dir, on_commit=lambda size, seconds: batches.append(size)) as store:

        async def main():
            # Submits interleaved with commands the kernel rejects (unknown task).
            commands = []
            for i in range(300):
                commands.append(submit(f"t{i:03d}"))
                commands.append(CancelTask(now=0, task_id=f"missing{i}", tenant=None))
            return await asyncio.gather(*(store.execute(c) for c in commands))

        decisions = asyncio.run(main())
        assert all(d.accepted for d in decisions[0::2])
        assert all(d.rejection.code is Code.not_found and not d.events for d in decisions[1::2])
        # Arrival order: gather starts the coroutines in order, each enqueues at once.
        assert [t.id for t in store.tasks(TaskQuery(limit=1000)).tasks] == [f"t{i:03d}" for i in range(300)]
        assert [store.task(f"t{i:03d}").seq for i in range(300)] == list(range(300))
    assert sum(batches) == 600 and max(batches) > 1, batches
    assert len(batches) < 600 / 4, f"expected group commit, got {len(batches)} commits"
    assert verify(data_dir) == []


def test_threads_share_commits_too(data_dir):
    batches: list[int] = []
    with LmdbService.open(data_dir, on_commit=lambda size, seconds: batches.append(size)) as store:

        def caller(n):
            for i in range(40):
                assert store.execute_sync(submit(f"t{n}-{i}")).accepted

        threads = [threading.Thread(target=caller, args=(n,)) for n in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert len(store.tasks(TaskQuery(limit=1000)).tasks) == 320
    assert sum(batches) == 320 and max(batches) > 1


def test_a_batch_without_events_needs_no_commit(data_dir):
    batches: list[int] = []
    with LmdbService.open(data_dir, on_commit=lambda size, seconds: batches.append(size)) as store:
        store.execute_sync(RegisterHost(now=0, host_id="h1", devices=(DeviceSpec(serial="s1"),)))
        for _ in range(5):
            assert (
                store.execute_sync(ClaimTask(now=0, host_id="h1", lease_id="L", lease_ms=1000)).reply
                == kernel.NoAssignment()
            )
    assert batches == [1]


def test_reads_never_wait_for_the_writer(data_dir):
    release = threading.Event()
    stalled = threading.Event()

    def on_commit(size, seconds):
        if not stalled.is_set():
            stalled.set()
            release.wait(10)  # hold the writer thread after the first commit

    with LmdbService.open(data_dir, on_commit=on_commit) as store:
        store.execute_sync(submit("t1"))
        assert stalled.wait(5)
        second = threading.Thread(target=store.execute_sync, args=(submit("t2"),))
        second.start()
        started = time.perf_counter()
        for _ in range(100):
            assert store.task("t1").status == "queued"
            assert store.task("t2") is None  # queued behind the stalled writer: not committed
            assert len(store.tasks(TaskQuery(limit=10)).tasks) == 1
        assert time.perf_counter() - started < 2
        release.set()
        second.join(5)
        assert store.task("t2") is not None


def test_a_failed_commit_fails_its_batch_and_applies_nothing(data_dir, monkeypatch):
    with LmdbService.open(data_dir) as store:
        store.execute_sync(submit("before"))
        writer = store._writer.commits
        original = writer._write

        def failing(txn, prepared):
            original(txn, prepared)  # the writes are in the transaction...
            raise OSError(28, "No space left on device")  # ...and then the commit fails

        monkeypatch.setattr(writer, "_write", failing)
        with pytest.raises(CommitFailed, match="could not be committed") as raised:
            store.execute_sync(submit("lost"))
        assert isinstance(raised.value.__cause__, OSError)
        monkeypatch.setattr(writer, "_write", original)
        assert store.task("lost") is None and "lost" not in writer_state(store).tasks
        assert store.execute_sync(submit("after")).accepted
        assert [t.id for t in store.tasks(TaskQuery(limit=10)).tasks] == ["before", "after"]
        assert store.task("after").seq == 1  # the failed submit left no trace in the state
    assert verify(data_dir) == []


def test_a_command_that_breaks_the_kernel_fails_alone(data_dir, monkeypatch):
    with LmdbService.open(data_dir) as store:
        check_a_kernel_bug_fails_alone(store, lambda task_id: task_id in writer_state(store).tasks, monkeypatch)
    assert verify(data_dir) == []


def check_a_kernel_bug_fails_alone(store, in_state, monkeypatch) -> None:
    """A command that raises in the kernel, applied halfway as a bug might, gets its error;
    the others of its batch commit, and nothing of it stays (`in_state(task_id)` asks the
    writer's state). For every store's writer."""
    real_execute = kernel.execute

    def execute(state, command):
        if getattr(command, "task_id", None) == "poison":
            real_execute(state, command)
            raise RuntimeError("kernel bug")
        return real_execute(state, command)

    monkeypatch.setattr(kernel, "execute", execute)

    async def main():
        commands = [submit(f"t{i}") for i in range(5)] + [submit("poison")] + [submit(f"u{i}") for i in range(5)]
        return await asyncio.gather(*(store.execute(c) for c in commands), return_exceptions=True)

    outcomes = asyncio.run(main())
    assert isinstance(outcomes[5], RuntimeError)
    assert all(d.accepted for i, d in enumerate(outcomes) if i != 5)
    assert store.task("poison") is None and not in_state("poison")
    assert len(store.tasks(TaskQuery(limit=100)).tasks) == 10


def test_manual_clock_starts_at_wall_time_and_resumes_after_restart(data_dir):
    before = time.time_ns() // 1_000_000
    with LmdbService.open(data_dir, clock="manual") as store:
        start = store.clock.now()
        assert before <= start <= time.time_ns() // 1_000_000
        assert advance_clock(store, 5_000) == start + 5_000
        assert asyncio.run(store.advance_clock(1)) == start + 5_001
        with pytest.raises(ValueError):
            advance_clock(store, 0)
    with LmdbService.open(data_dir, clock="manual") as store:
        assert store.clock.now() == start + 5_001
    with LmdbService.open(data_dir, clock="system") as store, pytest.raises(NoManualClock):
        advance_clock(store, 10)


def test_system_clock_never_goes_back_across_restarts(data_dir):
    with LmdbService.open(data_dir, clock="manual") as store:
        future = advance_clock(store, 10 * 86_400_000)  # ten days ahead of wall time
        store.execute_sync(submit("t1"))
    with LmdbService.open(data_dir, clock="system") as store:
        assert store.clock.now() >= future
        store.execute_sync(submit("t2"))
        assert store.task("t2").created_at >= store.task("t1").created_at == future
    assert verify(data_dir) == []


def test_leases_expire_through_the_store(data_dir):
    with LmdbService.open(data_dir, clock="manual") as store:
        store.execute_sync(RegisterHost(now=0, host_id="h1", devices=(DeviceSpec(serial="s1"),)))
        store.execute_sync(submit("t1", max_attempts=1))
        assignment = store.execute_sync(ClaimTask(now=0, host_id="h1", lease_id="L1", lease_ms=1_000)).reply
        assert store.next_expiry() == assignment.lease_expires_at
        store.execute_sync(StartAttempt(now=0, host_id="h1", task_id="t1", attempt=1, lease_id="L1"))
        advance_clock(store, 1_000)
        assert store.next_expiry() is None
        task = store.task("t1")
        assert (task.status, task.result.reason) == ("failed", "attempts_exhausted")
        assert store.host("h1").devices[0].reservation is None
        assert [e.type for e in store.history("t1")] == [
            "submitted",
            "assigned",
            "dispatched",
            "lease_expired",
            "ended",
        ]
    assert verify(data_dir) == []


def test_close_drains_the_queue_and_is_idempotent(data_dir):
    store = LmdbService.open(data_dir)

    async def main():
        pending = [asyncio.ensure_future(store.execute(submit(f"t{i}"))) for i in range(50)]
        await asyncio.sleep(0)  # every coroutine has queued its command
        await store.aclose()
        return await asyncio.gather(*pending)

    assert all(d.accepted for d in asyncio.run(main()))
    store.close()
    with pytest.raises(StoreClosed):
        store.execute_sync(submit("late"))
    with pytest.raises(StoreClosed):
        store.task("t1")
    with LmdbService.open(data_dir) as reopened:
        assert len(reopened.tasks(TaskQuery(limit=100)).tasks) == 50


def test_the_map_grows_while_readers_read(data_dir):
    errors: list[BaseException] = []
    done = threading.Event()
    big_labels = {f"label{i}": "x" * 200 for i in range(10)}
    with LmdbService.open(data_dir, map_size=1 << 20) as store:  # 1 MiB: full after ~300 tasks

        def reader():
            try:
                while not done.is_set():
                    store.tasks(TaskQuery(limit=50, status="queued"))
                    store.task("t1")
                    store.next_expiry()
            except BaseException as exc:  # noqa: BLE001 - reported below
                errors.append(exc)

        readers = [threading.Thread(target=reader) for _ in range(3)]
        for thread in readers:
            thread.start()

        async def main():
            for chunk in range(10):
                commands = [submit(f"t{chunk * 300 + i}", labels=big_labels) for i in range(300)]
                decisions = await asyncio.gather(*(store.execute(c) for c in commands))
                assert all(d.accepted for d in decisions)

        try:
            asyncio.run(main())
        finally:
            done.set()
            for thread in readers:
                thread.join()
        assert not errors, errors
        assert store._store.env.info()["map_size"] >= 8 << 20
        assert store.task("t2999").labels == big_labels
    assert verify(data_dir) == []
