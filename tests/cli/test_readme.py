"""The README's "Running it" commands, run as written, so the README cannot drift.

The first block starts a server, the simulator and a Host Agent for `lab-1` (its token made
with `amc tokens add`), runs a task and lists the hosts; it runs here in one `bash`, in an
empty directory, as a new user would paste it. Only the ports change: another server of the
machine may hold 8000. The second block's tokens file is made as written and must hold what
`amc conformance --tokens` needs (the suite itself runs against our own server in
tests/conformance).
"""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
from pathlib import Path

from amc.conformance.target import Tokens

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent  # where `amc` is installed, beside this interpreter


def running_it() -> list[str]:
    """The ```sh blocks of the README's "Running it" section."""
    section = (ROOT / "README.md").read_text(encoding="utf-8").split("\n## Running it\n")[1].split("\n## ")[0]
    return re.findall(r"^```sh\n(.*?)^```", section, re.S | re.M)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def shell(script: str, cwd: Path, timeout: float) -> subprocess.CompletedProcess:
    """`script` in bash, with `amc` on the PATH and no AMC_* setting of the developer's;
    background jobs are stopped when it ends, however it ends."""
    env = {key: value for key, value in os.environ.items() if not key.startswith("AMC_")}
    env["PATH"] = f"{BIN}{os.pathsep}{env.get('PATH', '')}"
    wrapped = "set -e\ntrap 'jobs -p | xargs -r kill 2>/dev/null || true; wait' EXIT\n" + script
    return subprocess.run(
        ["bash", "-c", wrapped], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout, check=False
    )


def test_the_readme_has_the_blocks_this_test_runs():
    stack, conformance = running_it()
    assert "amc tokens add --role host --host-id lab-1" in stack and "--host-id lab-1" in stack
    assert "amc host list" in stack and "amc task submit" in stack
    assert "amc conformance" in conformance and "amc tokens add" in conformance


def test_running_it_works_word_for_word(tmp_path):
    stack, _ = running_it()
    script = stack.replace("8000", str(free_port())).replace("15037", str(free_port()))
    done = shell(script, tmp_path, timeout=120)
    output = done.stdout + done.stderr
    assert done.returncode == 0, output
    assert "ended done (reported) on lab-1/" in done.stdout, output
    listed = done.stdout[done.stdout.rindex("HOST") :].splitlines()
    devices = [" ".join(line.split()) for line in listed[2:] if "amc-sim-" in line]
    assert devices[0].startswith("lab-1 ") and " s ago " in devices[0], output
    assert len(devices) == 4 and all(" yes " in row for row in devices), output


def test_the_conformance_tokens_are_made_as_written(tmp_path):
    _, conformance = running_it()
    adds = "\n".join(line for line in conformance.splitlines() if line.startswith("amc tokens add"))
    made = shell(adds, tmp_path, timeout=60)
    assert made.returncode == 0, made.stderr
    tokens = Tokens.load(tmp_path / "conformance-tokens.json")  # raises, saying what is missing
    assert tokens.tenant_a != tokens.tenant_b and tokens.host_1_id != tokens.host_2_id and tokens.admin
    assert "--tokens conformance-tokens.json" in conformance.splitlines()[-1]
