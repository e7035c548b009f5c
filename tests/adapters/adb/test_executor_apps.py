"""install, uninstall, push and pull through ppadb against the simulator (specs/protocol.md
Part F, "Actions that take inputs"). The inputs are local files here, handed to the executor
as the Host Agent hands it the files of its input cache."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from amc.adapters.adb.errors import StepFailed
from amc.sim.apk_build import build_apk

from .helpers import SERIAL

req = pytest.mark.req


def an_input(tmp_path: Path, data: bytes) -> tuple[dict[str, str], dict[str, Path]]:
    """The argument naming `data` as an input, and the `inputs` map the executor gets."""
    sha256 = hashlib.sha256(data).hexdigest()
    path = tmp_path / sha256
    path.write_bytes(data)
    return {"input": f"sha256:{sha256}"}, {sha256: path}


def packages(executor) -> set[str]:
    return {p["package"] for p in json.loads(executor.run("list_apps", {"third_party": True}).output)["packages"]}


@req("APPS/s2")
def test_install_reads_the_package_and_version_from_the_apk_and_installs_it(executor, sim, tmp_path):
    ref, files = an_input(tmp_path, build_apk("com.example.demo", version_code=7))
    result = executor.run("install", {"input": ref}, inputs=files)
    assert json.loads(result.output) == {"package": "com.example.demo", "version_code": 7, "installed": True}
    assert "com.example.demo" in packages(executor)
    assert sim.device(SERIAL).installed == {"com.example.demo": 7}
    assert not [path for path in sim.device(SERIAL).files if path.endswith(".apk")], "the pushed APK is removed"
    executor.run("launch", {"package": "com.example.demo"})  # the package read from the APK opens


@req("APPS/s3")
def test_installing_the_installed_version_again_is_a_completed_no_op(executor, sim, tmp_path):
    ref, files = an_input(tmp_path, build_apk("com.example.demo", version_code=3))
    executor.run("install", {"input": ref}, inputs=files)
    again = executor.run("install", {"input": ref}, inputs=files)
    outcome = json.loads(again.output)
    assert outcome["installed"] is False and "version 3 was already installed" in outcome["note"]
    assert not any(command.startswith("pm install") for command in again.commands)
    newer, newer_files = an_input(tmp_path, build_apk("com.example.demo", version_code=4))
    assert json.loads(executor.run("install", {"input": newer}, inputs=newer_files).output)["installed"] is True
    assert sim.device(SERIAL).installed["com.example.demo"] == 4


@req("APPS/s2")
def test_without_replace_an_installed_package_fails_with_the_devices_answer(executor, tmp_path):
    ref, files = an_input(tmp_path, build_apk("com.example.demo", version_code=1))
    executor.run("install", {"input": ref}, inputs=files)
    newer, newer_files = an_input(tmp_path, build_apk("com.example.demo", version_code=2))
    with pytest.raises(StepFailed) as caught:
        executor.run("install", {"input": newer, "replace": False}, inputs=newer_files)
    assert "INSTALL_FAILED_ALREADY_EXISTS" in caught.value.reason


@req("APPS/s4")
@pytest.mark.parametrize(
    ("data", "says"),
    [
        (b"not a zip at all", "not a zip archive"),
        (build_apk("com.example.demo")[:200], "not a zip archive"),
        (None, "has no AndroidManifest.xml"),
        (b"PK-manifest", "AndroidManifest.xml is not binary XML"),
    ],
    ids=["garbage", "truncated", "no-manifest", "bad-manifest"],
)
def test_an_apk_that_does_not_parse_fails_and_the_device_is_untouched(executor, sim, tmp_path, data, says):
    import io
    import zipfile

    if data is None or data == b"PK-manifest":
        out = io.BytesIO()
        with zipfile.ZipFile(out, "w") as apk:
            apk.writestr("classes.dex" if data is None else "AndroidManifest.xml", b"<manifest/>")
        data = out.getvalue()
    ref, files = an_input(tmp_path, data)
    before = len(sim.log(SERIAL))
    with pytest.raises(StepFailed) as caught:
        executor.run("install", {"input": ref}, inputs=files)
    assert caught.value.reason.startswith("the APK does not parse: ") and says in caught.value.reason
    assert "nothing was sent to the device" in caught.value.reason
    assert len(sim.log(SERIAL)) == before and caught.value.commands == ()


@req("APPS/s5")
def test_uninstall_removes_a_package_and_fails_for_one_not_installed(executor, tmp_path):
    ref, files = an_input(tmp_path, build_apk("com.example.demo"))
    executor.run("install", {"input": ref}, inputs=files)
    assert json.loads(executor.run("uninstall", {"package": "com.example.demo"}).output) == {
        "package": "com.example.demo"
    }
    assert "com.example.demo" not in packages(executor)
    with pytest.raises(StepFailed) as caught:
        executor.run("uninstall", {"package": "com.example.demo"})
    assert "pm uninstall did not remove com.example.demo: it said Failure" in caught.value.reason


@req("APPS/s6")
def test_push_then_pull_returns_the_same_bytes_as_an_artifact(executor, sim, tmp_path):
    data = bytes(range(256)) * 1000  # more than one sync chunk
    ref, files = an_input(tmp_path, data)
    path = "/sdcard/Download/fixture.bin"
    pushed = json.loads(executor.run("push", {"input": ref, "path": path}, inputs=files).output)
    assert pushed == {"path": path, "size": len(data), "sha256": hashlib.sha256(data).hexdigest()}
    assert sim.device(SERIAL).files[path] == data
    pulled = executor.run("pull", {"path": path}, step_id="back")
    assert pulled.artifact is not None and pulled.artifact.read_bytes() == data
    assert pulled.content_type == "application/octet-stream" and pulled.artifact.suffix == ".bin"
    assert json.loads(pulled.output) == pushed


@req("APPS/s6")
def test_pulling_a_missing_file_fails_naming_it_and_leaves_no_artifact(executor, tmp_path):
    with pytest.raises(StepFailed) as caught:
        executor.run("pull", {"path": "/sdcard/nothing.txt"})
    assert caught.value.reason == "the device could not read /sdcard/nothing.txt: No such file or directory"
    assert not list(tmp_path.glob("artifacts/*")), "the empty artifact is removed"


def test_an_input_the_agent_did_not_fetch_fails_the_step(executor):
    with pytest.raises(StepFailed) as caught:
        executor.run("push", {"input": {"input": "sha256:" + "0" * 64}, "path": "/sdcard/x"})
    assert "was not fetched to this host" in caught.value.reason
