"""amc.core stays pure: no IO, no clock, no randomness, nothing from the adapters."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

CORE = Path(__file__).resolve().parents[2] / "amc" / "core"

# Modules that do IO, read a clock or a random source, or belong to the edges.
FORBIDDEN_MODULES = {
    "asyncio",
    "io",
    "os",
    "pathlib",
    "random",
    "secrets",
    "select",
    "selectors",
    "shutil",
    "signal",
    "socket",
    "subprocess",
    "sys",
    "threading",
    "time",
    "uuid",
    "logging",
    "lmdb",
    "starlette",
    "uvicorn",
    "httpx",
    "click",
    "cattrs",
    "orjson",
    "ppadb",
    "prometheus_client",
}
FORBIDDEN_CALLS = {"now", "utcnow", "today", "time", "time_ns", "monotonic", "perf_counter", "open", "input", "print"}


def core_modules():
    return sorted(CORE.rglob("*.py"))


def test_core_imports_nothing_that_does_io():
    for path in core_modules():
        tree = ast.parse(path.read_text(), str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                names = [node.module or ""]
            else:
                continue
            for name in names:
                top = name.split(".")[0]
                assert top not in FORBIDDEN_MODULES, f"{path.name} imports {name}"
                assert not name.startswith(
                    ("amc.adapters", "amc.agent", "amc.cli", "amc.service", "amc.adapters.codec")
                ), f"{path.name} imports {name}"


def test_core_calls_no_clock_and_no_builtin_io():
    for path in core_modules():
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Call):
                func = node.func
                name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
                assert name not in FORBIDDEN_CALLS, f"{path.name}:{node.lineno} calls {name}()"


def test_importing_core_loads_no_adapter_library():
    # (python-statemachine itself imports asyncio for its async engine; it does no IO here.)
    code = (
        "import sys, amc.core.kernel, amc.core.invariants, amc.core.lifecycle, amc.core.history;"
        "print(' '.join(sorted(m for m in sys.modules if m.split('.')[0] in "
        "{'lmdb','starlette','uvicorn','httpx','click','cattrs','orjson','ppadb','prometheus_client'})))"
    )
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert loaded == [], f"importing amc.core loaded {loaded}"
