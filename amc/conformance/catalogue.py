"""The requirement catalogue the conformance report lists: every id, its title, its phase.

The source is the repository's ``specs/`` (``requirement-ids.txt`` for the ids and titles,
``requirements/*.md`` for which documents are ``Phase: later``). An installed suite has no
repository, so the catalogue ships inside this package as ``requirements.txt``, rendered from
``specs/`` by this module; a test of the repository checks that the two never drift apart.

Regenerate after changing specs/ (from the repository root)::

    python -m amc.conformance.catalogue specs
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

PACKAGED = Path(__file__).resolve().parent / "requirements.txt"
HEADER = (
    "# The requirement catalogue of the amc conformance report: id, phase (now or later), title.\n"
    "# Rendered from specs/requirement-ids.txt and specs/requirements/*.md by amc.conformance.catalogue;\n"
    "# do not edit by hand.\n"
)
_HEADING = re.compile(r"^#{2,3} ([A-Z][A-Z0-9-]*(?:/s\d+)?): ", re.M)


def render(specs: Path) -> str:
    """The catalogue file's text for the specs directory `specs`."""
    later: set[str] = set()
    for document in sorted((specs / "requirements").glob("*.md")):
        text = document.read_text()
        if "Phase: later" in text:
            later.update(_HEADING.findall(text))
    lines = [HEADER]
    for line in (specs / "requirement-ids.txt").read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            ident, _, title = line.partition(" ")
            phase = "later" if ident in later else "now"
            lines.append(f"{ident:<25}{phase:<6}{title.strip()}\n")
    return "".join(lines)


def load(path: Path = PACKAGED) -> tuple[dict[str, str], set[str]]:
    """Every requirement id with its title, and the ids of phase-later documents."""
    titles: dict[str, str] = {}
    later: set[str] = set()
    for line in path.read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            ident, phase, title = line.split(None, 2)
            titles[ident] = title
            if phase == "later":
                later.add(ident)
    return titles, later


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python -m amc.conformance.catalogue SPECS_DIR", file=sys.stderr)
        return 2
    PACKAGED.write_text(render(Path(argv[0])))
    print(f"wrote {PACKAGED}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
