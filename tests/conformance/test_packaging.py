"""The conformance suite ships in the wheel, behind the `conformance` extra.

A plain install (a server, a Host Agent) needs neither pytest nor Hypothesis. The slow
test builds the wheel, installs it with the extra into a fresh virtualenv and runs
`amc conformance` from a directory outside the repository against a running `amc serve`.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from amc.conformance import plugin
from amc.conformance.target import ManagedServer

ROOT = Path(__file__).resolve().parents[2]
TEST_ONLY = ("pytest", "hypothesis")

pytestmark = pytest.mark.conformance_meta


def test_nothing_a_server_or_a_host_imports_needs_pytest_or_hypothesis():
    """The CLI, `amc serve`, the Host Agent and the model checker import neither at import time."""
    modules = [
        "amc.cli",
        "amc.cli.serve",
        "amc.cli.host",
        "amc.cli.model",
        "amc.cli.conformance",
        "amc.cli.up",
        "amc.adapters.http.app",
        "amc.adapters.http.server",
        "amc.agent",
        "amc.service",
        "amc.sim",
    ]
    probe = (
        f"import importlib, sys\nfor name in {modules!r}:\n    importlib.import_module(name)\n"
        f"print(sorted(m for m in sys.modules if m.split('.')[0] in {TEST_ONLY!r}))"
    )
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.strip() == "[]", f"imported at import time: {result.stdout}"


def test_amc_conformance_without_the_extra_says_how_to_install_it(tmp_path):
    """Without pytest or Hypothesis the command stops with the pip line that installs them."""
    tokens = tmp_path / "tokens.json"
    tokens.write_text("[]")
    # Hypothesis is installed here: make it look absent to the command, as in a plain install.
    hide = (
        "import importlib.util, sys\n"
        "real = importlib.util.find_spec\n"
        "importlib.util.find_spec = lambda name, *a: None if name == 'hypothesis' else real(name, *a)\n"
        "from amc.cli import main\n"
        f"sys.argv = ['amc', 'conformance', 'http://127.0.0.1:9', '--tokens', {str(tokens)!r}]\n"
        "main()\n"
    )
    result = subprocess.run([sys.executable, "-c", hide], capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "needs hypothesis" in result.stderr
    assert "pip install 'agentic-mobile-control[conformance]'" in result.stderr


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    """The wheel of this checkout, built from a copy (a build writes into its source tree)."""
    work = tmp_path_factory.mktemp("wheel")
    source = work / "source"
    shutil.copytree(
        ROOT,
        source,
        ignore=shutil.ignore_patterns(
            ".venv", ".git", "__pycache__", "*.egg-info", "build", "dist", ".hypothesis", ".amc", ".pytest_cache"
        ),
    )
    result = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(work / "dist"), str(source)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    (built,) = (work / "dist").glob("agentic_mobile_control-*.whl")
    return built


@pytest.mark.slow
def test_the_wheel_holds_the_suite_and_keeps_pytest_in_the_extras(wheel):
    """The scenarios, their conftest, the catalogue and the console's files are in the wheel;
    pytest and Hypothesis only in extras."""
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        (metadata,) = [n for n in names if n.endswith(".dist-info/METADATA")]
        requires = [
            line.removeprefix("Requires-Dist: ")
            for line in archive.read(metadata).decode().splitlines()
            if line.startswith("Requires-Dist: ")
        ]
    for name in ("conftest.py", "test_submit.py", "test_differential.py"):
        assert f"amc/conformance/scenarios/{name}" in names
    assert {"amc/conformance/requirements.txt", "amc/conformance/pytest.ini"} <= names
    # The web console's static files (amc serve serves them at /ui; nothing is built or fetched).
    console = {
        f"amc/adapters/http/console/{name}" for name in ("index.html", "app.js", "app.css", "task.js", "live.js")
    }
    assert console <= names, f"missing from the wheel: {sorted(console - names)}"

    def project(requirement: str) -> str:
        return requirement.split(";")[0].split(">")[0].split("=")[0].split("[")[0].strip().lower()

    plain = {project(r) for r in requires if "extra ==" not in r}
    conformance = {project(r) for r in requires if 'extra == "conformance"' in r}
    assert not plain & set(TEST_ONLY), f"a plain install pulls in {sorted(plain & set(TEST_ONLY))}"
    assert set(TEST_ONLY) <= conformance


@pytest.mark.slow
def test_the_installed_suite_runs_against_amc_serve_from_any_directory(pytestconfig, wheel, tmp_path):
    """pip install 'wheel[conformance]' in a fresh virtualenv, then `amc conformance URL --tokens FILE` exits 0."""
    if plugin.option(pytestconfig, "--target-url"):
        pytest.skip("a test of the suite itself, not of the target")
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    env = {key: value for key, value in os.environ.items() if key not in ("PYTHONPATH", "VIRTUAL_ENV")}
    install = subprocess.run(
        [str(venv / "bin" / "python"), "-m", "pip", "install", "-q", f"{wheel}[conformance]"],
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
    )
    assert install.returncode == 0, install.stdout[-2000:] + install.stderr[-2000:]
    elsewhere = tmp_path / "elsewhere"  # no checkout here, and no pytest configuration
    elsewhere.mkdir()
    report = elsewhere / "report.json"
    with ManagedServer(tmp_path / "server") as server:
        result = subprocess.run(
            [
                str(venv / "bin" / "amc"),
                "conformance",
                server.url,
                "--tokens",
                str(server.tokens_path),
                "--report",
                str(report),
            ],
            cwd=elsewhere,
            capture_output=True,
            text=True,
            timeout=600,
            env=env,
        )
    output = result.stdout[-4000:] + result.stderr[-2000:]
    assert result.returncode == 0, output
    # The installed suite ran (its scenarios live in the virtualenv), and reported every requirement
    assert f"rootdir: {venv}" in result.stdout, output
    document = json.loads(report.read_text())
    assert document["clock"] == "manual"
    assert document["summary"].get("failed", 0) == 0
    assert document["summary"]["passed"] >= 100, document["summary"]
