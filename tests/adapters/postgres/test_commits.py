"""The writer's own wire path: arrays encoded by hand, and the prepared commit sent by libpq.

PostgreSQL itself decodes what arrays.py encodes (any mistake in the format is an error or a
different value), and CommitConnection's answers, a refusal included, are those psycopg
would give.
"""

from __future__ import annotations

import asyncio
import threading
import time

import psycopg
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from amc.adapters.postgres import arrays
from amc.adapters.postgres.commits import CommitConnection
from amc.adapters.postgres.store import connect

INT8 = st.integers(min_value=-(2**63), max_value=2**63 - 1)
TEXT = st.text(alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"))


@pytest.fixture(scope="module")
def conn(pg_cluster):
    with connect(pg_cluster.new_database()) as conn:
        yield conn


def decoded(conn: psycopg.Connection, sql_type: str, encoded: bytes) -> list:
    """What PostgreSQL reads from `encoded`, sent in binary as a parameter of `sql_type`."""
    oid = {"int8[]": 1016, "text[]": 1009, "bytea[]": 1001}[sql_type]
    result = conn.pgconn.exec_params(f"SELECT $1::{sql_type}".encode(), [encoded], [oid], [1])
    assert result.status == psycopg.pq.ExecStatus.TUPLES_OK, result.error_message
    value = result.get_value(0, 0)
    assert value is not None
    # Let psycopg load PostgreSQL's own text form of the array.
    (loaded,) = conn.execute(f"SELECT %s::text::{sql_type}", (value.decode(),)).fetchone()
    return loaded


_SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


@_SETTINGS
@given(st.lists(st.one_of(st.none(), INT8), max_size=20))
def test_int8_arrays_reach_postgresql_as_written(conn, values):
    assert decoded(conn, "int8[]", arrays.int8_array(values)) == values


@_SETTINGS
@given(st.lists(TEXT, max_size=20))
def test_text_arrays_reach_postgresql_as_written(conn, values):
    assert decoded(conn, "text[]", arrays.text_array(values)) == values


@_SETTINGS
@given(st.lists(st.binary(max_size=300), max_size=20))
def test_bytea_arrays_reach_postgresql_as_written(conn, values):
    assert decoded(conn, "bytea[]", arrays.bytea_array(values)) == values


def test_a_prepared_commit_writes_and_a_refusal_is_psycopgs_error(pg_cluster):
    url = pg_cluster.new_database()
    with connect(url) as setup:
        setup.execute("CREATE TABLE t (n int8 PRIMARY KEY, body bytea)")
    sql = "INSERT INTO t (n, body) SELECT * FROM unnest($1, $2) RETURNING 1 / (n - $3)::int"
    commits = CommitConnection(connect(url), sql, ("int8[]", "bytea[]", "int8"))

    async def main() -> None:
        await commits.execute([arrays.int8_array([1, 2]), arrays.bytea_array([b"a", b"b"]), arrays.int8(0)])
        with pytest.raises(psycopg.errors.DivisionByZero):  # 1 / (3 - 3): refused, nothing written
            await commits.execute([arrays.int8_array([3, 4]), arrays.bytea_array([b"c", b"d"]), arrays.int8(3)])
        with pytest.raises(psycopg.errors.UniqueViolation):
            await commits.execute([arrays.int8_array([1]), arrays.bytea_array([b"x"]), arrays.int8(0)])
        await commits.execute([arrays.int8_array([5]), arrays.bytea_array([b"e"]), arrays.int8(0)])
        commits.close()

    asyncio.run(main())
    with connect(url) as check:
        assert check.execute("SELECT n, body FROM t ORDER BY n").fetchall() == [(1, b"a"), (2, b"b"), (5, b"e")]


def test_a_commit_whose_connection_is_cut_fails(pg_cluster):
    url = pg_cluster.new_database()
    commits = CommitConnection(connect(url), "SELECT $1::int8", ("int8",))

    async def main() -> None:
        await commits.execute([arrays.int8(1)])
        with connect(url) as killer:
            killer.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE pid = %s",
                (commits.conn.info.backend_pid,),
            )
        await asyncio.sleep(0.2)  # the server's goodbye arrives and is read
        with pytest.raises(psycopg.OperationalError):
            await asyncio.wait_for(commits.execute([arrays.int8(2)]), 5)
        commits.close()

    asyncio.run(main())


def _one_event(epoch: int, seq: int) -> list[bytes]:
    from amc.adapters.postgres.writer import EVENT_COLUMNS, HOST_COLUMNS, META_COLUMNS, TASK_COLUMNS, _columns

    return [
        arrays.int8(epoch),
        *_columns([(seq, None, b"{}")], EVENT_COLUMNS),
        *_columns([], TASK_COLUMNS),
        *_columns([], HOST_COLUMNS),
        *_columns([], META_COLUMNS),
    ]


@pytest.mark.req("HA")
def test_the_fence_refuses_a_commit_that_waited_for_a_takeover(pg_url):
    """A takeover's epoch bump is in progress: the commit waits on the leadership row, then
    finds the new epoch and writes nothing."""
    from amc.adapters.postgres import schema
    from amc.adapters.postgres.writer import COMMIT_BATCH, COMMIT_TYPES

    with connect(pg_url) as setup:
        schema.open_schema(setup)
    commits = CommitConnection(connect(pg_url), COMMIT_BATCH, COMMIT_TYPES)
    outcome: list[BaseException | None] = []
    with psycopg.connect(pg_url) as takeover:  # a transaction: the bump holds the row
        takeover.execute("UPDATE amc_leadership SET epoch = epoch + 1")
        waiting = threading.Thread(target=lambda: outcome.append(_attempt(commits, _one_event(0, 1))))
        waiting.start()
        waiting.join(0.5)
        assert waiting.is_alive()  # the commit waits for the bump
        takeover.commit()
        waiting.join(5)
    assert isinstance(outcome[0], psycopg.errors.DivisionByZero)
    commits.close()
    with connect(pg_url) as check:
        assert check.execute("SELECT count(*) FROM amc_events").fetchone() == (0,)


@pytest.mark.req("HA")
def test_the_fence_rechecks_a_row_that_changed_after_it_was_read(pg_url):
    """The commit read the old epoch, then the bump committed before the row was locked:
    locking finds the newer version and the fence is evaluated again on it (a pause between
    the read and the lock is put into the fence's own expression)."""
    from amc.adapters.postgres import schema
    from amc.adapters.postgres.writer import COMMIT_BATCH, COMMIT_TYPES

    with connect(pg_url) as setup:
        schema.open_schema(setup)
    fence = "(epoch = $1)::int"
    assert fence in COMMIT_BATCH
    slow = COMMIT_BATCH.replace(fence, "(epoch = $1 AND pg_sleep(1) IS NOT NULL)::int")
    commits = CommitConnection(connect(pg_url), slow, COMMIT_TYPES)
    outcome: list[BaseException | None] = []
    reading = threading.Thread(target=lambda: outcome.append(_attempt(commits, _one_event(0, 1))))
    reading.start()
    time.sleep(0.3)  # the commit has read epoch 0 and sleeps before locking the row
    with connect(pg_url) as takeover:
        takeover.execute("UPDATE amc_leadership SET epoch = epoch + 1")  # not blocked: no lock yet
    reading.join(5)
    assert isinstance(outcome[0], psycopg.errors.DivisionByZero)
    commits.close()
    with connect(pg_url) as check:
        assert check.execute("SELECT count(*) FROM amc_events").fetchone() == (0,)


def _attempt(commits: CommitConnection, params: list[bytes]) -> BaseException | None:
    try:
        commits.execute_sync(params)
    except BaseException as exc:
        return exc
    return None


def test_a_commit_connection_past_descriptor_1024_is_watched(pg_cluster):
    """A busy server holds many sockets; the writer's look at its connection must not be
    limited to descriptors under 1024 (as select() is)."""
    import os
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard < 1200:
        pytest.skip(f"this process may open only {hard} files")
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, 1200), hard))
    filler = [os.open(os.devnull, os.O_RDONLY) for _ in range(1100)]
    try:
        commits = CommitConnection(connect(pg_cluster.new_database()), "SELECT $1::int8", ("int8",))
        assert commits.conn.pgconn.socket > 1024

        async def main() -> None:
            assert not commits.answered()
            await commits.execute([arrays.int8(1)])
            commits.close()

        asyncio.run(main())
    finally:
        for fd in filler:
            os.close(fd)
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
