"""specs/ and the tests stay traceable: every scenario id is defined once and tested.

Ids of a phase-`later` requirement file are specified but not built yet; they are exempt
from the "tested" rule until their phase starts.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
REQUIREMENTS = ROOT / "specs" / "requirements"
HEADING = re.compile(r"^#{2,3} ([A-Z][A-Z0-9-]*(?:/s\d+)?): ", re.M)
MARKER = re.compile(r"""req\(\s*((?:["'][A-Z][A-Z0-9-]*/s\d+["']\s*,?\s*)+)\)""")


def listed_ids() -> list[str]:
    lines = (ROOT / "specs" / "requirement-ids.txt").read_text().splitlines()
    return [line.split()[0] for line in lines if line.strip() and not line.startswith("#")]


def defined_ids() -> dict[str, bool]:
    """Every id with a heading in specs/requirements, mapped to "is it built now?"."""
    ids: dict[str, bool] = {}
    for path in sorted(REQUIREMENTS.glob("*.md")):
        text = path.read_text()
        now = "Phase: later" not in text
        for found in HEADING.findall(text):
            assert found not in ids, f"{found} is defined twice"
            ids[found] = now
    return ids


def ids_in_tests() -> set[str]:
    """The ids carried by amc's tests and by the conformance suite's scenarios."""
    ids: set[str] = set()
    for path in [*ROOT.joinpath("tests").rglob("*.py"), *ROOT.joinpath("amc", "conformance").rglob("*.py")]:
        for group in MARKER.findall(path.read_text()):
            ids.update(re.findall(r"[A-Z][A-Z0-9-]*/s\d+", group))
    return ids


def test_every_listed_id_is_defined_in_specs_and_nothing_else_is():
    assert sorted(defined_ids()) == sorted(listed_ids())


def test_every_current_scenario_is_checked_by_a_test():
    scenarios = [i for i, now in defined_ids().items() if now and "/" in i]
    missing = sorted(set(scenarios) - ids_in_tests())
    assert not missing, f"scenarios without a test carrying their id: {missing}"


def test_tests_only_name_ids_that_exist():
    unknown = sorted(ids_in_tests() - set(defined_ids()))
    assert not unknown, f"tests carry ids that specs/ does not define: {unknown}"
