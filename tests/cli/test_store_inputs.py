"""`amc store gc` and inputs (specs/protocol.md Part F, Retention): an input stays while an
unfinished task names it; `--older-than` removes the others, records and bytes; plain gc
never removes an input's bytes."""

from __future__ import annotations

import hashlib

import pytest
from click.testing import CliRunner

from amc.adapters.lmdb import LmdbService
from amc.adapters.lmdb.blobs import FileBlobStore
from amc.adapters.lmdb.inputs import FileInputCatalogue
from amc.cli import main
from amc.core import inputs
from amc.core.commands import SubmitTask
from amc.core.records import Plan, Step

IN_USE, UNUSED = b"an app a queued task installs" * 100, b"a fixture nobody names any more" * 100


def store_input(data, tenant: str, content: bytes, now: int) -> str:
    blobs = FileBlobStore.in_data_dir(data)
    with blobs.begin() as writer:
        writer.write(content)
        blob = writer.finish()
    FileInputCatalogue.in_data_dir(data).record(tenant, blob.sha256, blob.size, now, 1 << 30)
    return blob.sha256


@pytest.mark.req("UPLOAD/s10")
def test_gc_older_than_removes_the_inputs_no_unfinished_task_names(tmp_path):
    data = tmp_path / "data"
    service = LmdbService.open(data)
    now = service.clock.now()
    in_use = store_input(data, "acme", IN_USE, now - 2 * 86_400_000)
    unused = store_input(data, "acme", UNUSED, now - 2 * 86_400_000)
    # The kernel takes any well-formed plan: the edge's action table is what refuses an
    # action it does not know, so a task may name an input before any action takes one.
    step = Step(id="put", action="fixture", args={"file": inputs.reference(in_use)})
    decision = service.execute_sync(SubmitTask(now=0, task_id="t_named", tenant="acme", plan=Plan(steps=(step,))))
    assert decision.rejection is None
    service.close()
    blobs, catalogue = FileBlobStore.in_data_dir(data), FileInputCatalogue.in_data_dir(data)

    plain = CliRunner().invoke(main, ["store", "gc", "--data", str(data)], catch_exceptions=False)
    assert plain.exit_code == 0, plain.output
    assert blobs.path_of(in_use).exists() and blobs.path_of(unused).exists()  # records keep their bytes

    dry = CliRunner().invoke(main, ["store", "gc", "--data", str(data), "--older-than", "1d", "--dry-run"])
    assert dry.exit_code == 0 and "and 1 inputs no unfinished task names" in dry.stdout, dry.output
    assert catalogue.get("acme", unused) is not None and blobs.path_of(unused).exists()

    gone = CliRunner().invoke(main, ["store", "gc", "--data", str(data), "--older-than", "1d"])
    assert gone.exit_code == 0, gone.output
    assert f"Freed 1 files, {len(UNUSED) / 1024:.1f} KiB ({len(UNUSED)} bytes)" in gone.stdout
    assert catalogue.get("acme", unused) is None and not blobs.path_of(unused).exists()
    assert catalogue.get("acme", in_use) is not None
    assert hashlib.sha256(blobs.path_of(in_use).read_bytes()).hexdigest() == in_use
