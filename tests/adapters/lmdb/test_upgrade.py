"""A store written by the amc of schema 1 is upgraded in place and answers as it did.

The fixture was written by that amc (`fixtures/make_schema1.py`): a manual-clock store
after a random workload of 185 commands, with what its reads answered then.
"""

from __future__ import annotations

import tarfile
from pathlib import Path

import lmdb
import orjson
import pytest

from amc.adapters import codec
from amc.adapters.lmdb import LmdbService, SchemaMismatch, layout, upgrade, verify
from amc.core.commands import (
    EndSession,
    PollAction,
    PostAction,
    ReleaseAttempt,
    ReportAction,
    StoreArtifact,
    SubmitTask,
)
from amc.service import TaskQuery
from tests.adapters.lmdb.helpers import writer_state
from tests.adapters.lmdb.workload import Workload

FIXTURES = Path(__file__).parent / "fixtures"


@pytest.fixture
def schema1_dir(tmp_path):
    path = tmp_path / "old"
    with tarfile.open(FIXTURES / "schema1-store.tar.gz") as tar:
        tar.extractall(path, filter="data")
    return path


@pytest.fixture(scope="module")
def answered():
    """What the fixture's reads answered then, with the fields later schemas added: schema 3
    gives every attempt `steps` and `release_reason`, null (none of them was released)."""
    recorded = orjson.loads((FIXTURES / "schema1-store.json").read_bytes())
    for task in recorded["tasks"].values():
        for attempt in task["attempts"]:
            attempt.update(steps=None, release_reason=None)
    return recorded


def schema_of(path) -> bytes:
    with (
        lmdb.open(str(path), max_dbs=16, readonly=True) as env,
        env.begin(db=env.open_db(layout.DB_META, create=False)) as txn,
    ):
        return txn.get(layout.META_SCHEMA)


def reads_of(service: LmdbService, answered: dict) -> dict:
    """The same reads the fixture recorded, asked of `service`."""
    pages = {}
    for scope in answered["pages"]:
        tenant, status = (None if part == "None" else part for part in scope.split("/"))
        pages[scope] = [t.id for t in service.tasks(TaskQuery(limit=1000, tenant=tenant, status=status)).tasks]
    return {
        "tasks": {t: orjson.loads(codec.dumps(service.task(t))) for t in answered["tasks"]},
        "hosts": [orjson.loads(codec.dumps(h)) for h in service.hosts()],
        "history": {t: [[e.seq, e.at, e.type, e.data] for e in service.history(t)] for t in answered["tasks"]},
        "pages": pages,
        "next_expiry": service.next_expiry(),
    }


def test_a_read_only_open_of_a_schema_1_store_says_how_to_upgrade_it(schema1_dir):
    with pytest.raises(SchemaMismatch) as refused:
        verify(schema1_dir)
    message = str(refused.value)
    assert "schema version 1" in message and "upgrades it in place" in message and str(schema1_dir) in message
    assert schema_of(schema1_dir) == b"1"  # nothing was written


# The fields records gained after schema 1, with the value an older record reads as.
ADDED_TASK_FIELDS = {"artifacts": [], "session": None}  # schema 4, schema 6


ADDED_STEP_OUTCOME_FIELDS = {"artifacts": []}  # schema 5


ADDED_PLAN_FIELDS = {"record": False}  # schema 7


def with_fields_added_since(answered: dict) -> dict:
    """What the reads recorded at schema 1 answer now: the same, plus the fields added since."""
    tasks = {t: {**task, **ADDED_TASK_FIELDS} for t, task in answered["tasks"].items()}
    for task in tasks.values():
        task["plan"] = {**task["plan"], **ADDED_PLAN_FIELDS}
    for task in tasks.values():
        if task["result"] is not None and task["result"]["steps"] is not None:
            steps = [{**step, **ADDED_STEP_OUTCOME_FIELDS} for step in task["result"]["steps"]]
            task["result"] = {**task["result"], "steps": steps}
    return {**answered, "tasks": tasks}


def test_opening_a_schema_1_store_for_writing_upgrades_it_and_every_read_answers_as_before(schema1_dir, answered):
    assert schema_of(schema1_dir) == b"1"
    with LmdbService.open(schema1_dir, clock="manual") as service:
        assert reads_of(service, answered) == with_fields_added_since(answered)
        assert len(answered["tasks"]) > 30 and answered["next_expiry"] is not None  # the fixture is not trivial
    assert schema_of(schema1_dir) == str(layout.SCHEMA_VERSION).encode()
    assert verify(schema1_dir) == []


def test_an_upgraded_store_keeps_serving(schema1_dir):
    with LmdbService.open(schema1_dir, clock="manual") as service:
        load = Workload(seed=11)
        load.counter = 10_000  # fresh ids that the old workload did not use
        for _ in range(150):
            service.execute_sync(load.next_command(writer_state(service)))
        state = writer_state(service)
    assert verify(schema1_dir) == []
    with LmdbService.open(schema1_dir, clock="manual") as service:
        assert writer_state(service).tasks == state.tasks  # start-up reads the new layout


def test_an_upgrade_that_fails_part_way_leaves_the_schema_1_store_as_it_was(schema1_dir, answered, monkeypatch):
    before = (schema1_dir / layout.DATA_FILE).read_bytes()
    real_u64, calls = layout.u64, []

    def fail_on_the_tenth(value):
        calls.append(value)
        if len(calls) == 10:
            raise OSError("the disk went away")
        return real_u64(value)

    monkeypatch.setattr(upgrade.layout, "u64", fail_on_the_tenth)
    with pytest.raises(OSError, match="the disk went away"):
        LmdbService.open(schema1_dir)
    monkeypatch.undo()
    assert schema_of(schema1_dir) == b"1"
    assert (schema1_dir / layout.DATA_FILE).read_bytes() == before  # the transaction was aborted
    with LmdbService.open(schema1_dir, clock="manual") as service:
        assert reads_of(service, answered) == with_fields_added_since(answered)


def test_an_upgrade_that_does_not_fit_the_map_grows_it(schema1_dir, answered):
    # The new records are written beside the old ones, which are freed only at the commit.
    size = (schema1_dir / layout.DATA_FILE).stat().st_size
    with lmdb.open(str(schema1_dir), map_size=size, max_dbs=16) as env:
        upgrade.upgrade(schema1_dir, env, env.open_db(layout.DB_META))
        assert env.info()["map_size"] > size
    assert schema_of(schema1_dir) == str(layout.SCHEMA_VERSION).encode()
    with LmdbService.open(schema1_dir, clock="manual") as service:
        assert reads_of(service, answered) == with_fields_added_since(answered)


def test_the_records_hold_the_fields_of_the_current_schema():
    """A field added to a record (or removed) changes the stored JSON: it must come with a
    new `layout.SCHEMA_VERSION`, its upgrade step, and `upgrade.STORED_FIELDS` updated."""
    found, declared = codec.stored_fields(), upgrade.STORED_FIELDS
    changes = []
    for name in sorted(found.keys() | declared.keys()):
        now, then = found.get(name, ()), declared.get(name, ())
        changes += [f"{name}.{field} is new" for field in now if field not in then]
        changes += [f"{name}.{field} is gone" for field in then if field not in now]
        if not changes and now != then:
            changes.append(f"{name}: the fields are in another order ({now})")
    assert not changes, (
        f"the stored records differ from schema {layout.SCHEMA_VERSION}: {changes}; bump layout.SCHEMA_VERSION, "
        "add the step that upgrades older stores to upgrade.py, and update upgrade.STORED_FIELDS"
    )


def _is_session_command(command) -> bool:
    """A command no store before schema 6 could record (Part D)."""
    return isinstance(command, (PostAction, EndSession, PollAction, ReportAction)) or (
        isinstance(command, SubmitTask) and command.idle_ms is not None
    )


def test_a_schema_5_store_is_upgraded_without_rewriting_a_record(tmp_path):
    """Schema 6 adds `Task.session`; a record written without it is a plan's task."""
    path = tmp_path / "store"
    state = write_workload_then_downgrade(path, b"5", (), lambda record: None)
    before = stored_records(path)
    with LmdbService.open(path, clock="manual") as service:
        assert writer_state(service).tasks == state.tasks
    assert schema_of(path) == str(layout.SCHEMA_VERSION).encode()
    assert stored_records(path) == before
    assert verify(path) == []


def test_a_schema_6_store_is_upgraded_without_rewriting_a_record(tmp_path):
    """Schema 7 adds `Plan.record`; a plan written without it does not record."""
    path = tmp_path / "store"
    state = write_workload_then_downgrade(path, b"6", (), lambda record: None)
    before = stored_records(path)
    with LmdbService.open(path, clock="manual") as service:
        assert writer_state(service).tasks == state.tasks
    assert schema_of(path) == str(layout.SCHEMA_VERSION).encode()
    assert stored_records(path) == before
    assert verify(path) == []


def write_workload_then_downgrade(path, schema: bytes, skipped: tuple[type, ...], strip) -> object:
    """A store written by a random workload (without the commands of `skipped`, which its
    schema could not record), rewritten as `schema` wrote it: `strip` edits each record."""
    with LmdbService.open(path, clock="manual") as service:
        load = Workload(seed=3)
        for _ in range(60):
            command = load.next_command(writer_state(service))
            if not isinstance(command, skipped) and not _is_session_command(command):
                service.execute_sync(command)
        state = writer_state(service)
    with lmdb.open(str(path), max_dbs=16) as env:
        tasks, meta = env.open_db(layout.DB_TASKS), env.open_db(layout.DB_META)
        with env.begin(write=True) as txn:
            for key, raw in list(txn.cursor(db=tasks)):
                record = orjson.loads(raw)
                assert record.pop("session") is None  # schema 6 added it
                assert record["plan"].pop("record") is False  # schema 7 added it
                strip(record)
                txn.put(key, orjson.dumps(record), db=tasks)
            txn.put(layout.META_SCHEMA, schema, db=meta)
    return state


def stored_records(path) -> dict[bytes, bytes]:
    with (
        lmdb.open(str(path), max_dbs=16, readonly=True) as env,
        env.begin(db=env.open_db(layout.DB_TASKS, create=False)) as txn,
    ):
        return dict(txn.cursor())


def without_artifacts(record: dict) -> None:
    assert record.pop("artifacts") == []


def test_a_schema_3_store_is_upgraded_without_rewriting_a_record(tmp_path):
    """Schema 4 adds `Task.artifacts`; a record written without it reads as having none."""
    path = tmp_path / "store"
    state = write_workload_then_downgrade(path, b"3", (StoreArtifact,), without_artifacts)
    before = stored_records(path)
    with pytest.raises(SchemaMismatch):
        verify(path)  # a read-only open does not upgrade
    with LmdbService.open(path, clock="manual") as service:
        assert writer_state(service).tasks == state.tasks
    assert schema_of(path) == str(layout.SCHEMA_VERSION).encode() == b"7"
    assert stored_records(path) == before
    assert verify(path) == []


def without_step_artifacts(record: dict) -> None:
    """A task record as schema 4 wrote it: its step outcomes have no `artifacts`."""
    outcomes = list((record["result"] or {}).get("steps") or ())
    outcomes += [step for attempt in record["attempts"] for step in attempt["steps"] or ()]
    for outcome in outcomes:
        assert outcome.pop("artifacts") == []


def test_a_schema_4_store_is_upgraded_without_rewriting_a_record(tmp_path):
    """Schema 5 adds `StepOutcome.artifacts`; an outcome written without it lists none."""
    path = tmp_path / "store"
    state = write_workload_then_downgrade(path, b"4", (), without_step_artifacts)
    before = stored_records(path)
    assert any(b'"steps":[{' in raw for raw in before.values()), "the workload reported no step outcomes"
    with LmdbService.open(path, clock="manual") as service:
        assert writer_state(service).tasks == state.tasks
    assert schema_of(path) == str(layout.SCHEMA_VERSION).encode()
    assert stored_records(path) == before
    assert verify(path) == []


def test_a_schema_2_store_takes_the_release_step_and_then_the_artifacts_step(tmp_path):
    """From schema 2, the attempts gain `steps` and `release_reason` (written, null) and the
    tasks `artifacts` (not written: read as none)."""

    def as_schema_2(record: dict) -> None:
        without_artifacts(record)
        for attempt in record["attempts"]:
            assert attempt.pop("steps") is None and attempt.pop("release_reason") is None

    path = tmp_path / "store"
    state = write_workload_then_downgrade(path, b"2", (StoreArtifact, ReleaseAttempt), as_schema_2)
    with LmdbService.open(path, clock="manual") as service:
        assert writer_state(service).tasks == state.tasks
    assert schema_of(path) == str(layout.SCHEMA_VERSION).encode()
    records = [orjson.loads(raw) for raw in stored_records(path).values()]
    attempts = [a for record in records for a in record["attempts"]]
    assert attempts and all(a["steps"] is None and a["release_reason"] is None for a in attempts)
    assert all("artifacts" not in record for record in records)
    assert verify(path) == []


def test_the_upgrade_writes_the_new_attempt_fields_into_every_stored_task(schema1_dir):
    """Schema 3: each stored attempt holds `steps` and `release_reason` (null), not only as a
    default filled at read time, so an amc that reads schema 3 finds the fields it wrote."""
    with LmdbService.open(schema1_dir, clock="manual"):
        pass
    with (
        lmdb.open(str(schema1_dir), max_dbs=16, readonly=True) as env,
        env.begin(db=env.open_db(layout.DB_TASKS, create=False)) as txn,
    ):
        attempts = [a for _, raw in txn.cursor() for a in orjson.loads(raw)["attempts"]]
    assert attempts and all(a["steps"] is None and a["release_reason"] is None for a in attempts)
