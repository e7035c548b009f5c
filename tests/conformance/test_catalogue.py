"""The catalogue shipped with the conformance suite is the one specs/ defines."""

from __future__ import annotations

from pathlib import Path

import pytest

from amc.conformance import catalogue

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.conformance_meta


def test_the_packaged_catalogue_is_rendered_from_specs():
    """amc/conformance/requirements.txt never drifts from specs/requirement-ids.txt and specs/requirements."""
    assert catalogue.PACKAGED.read_text() == catalogue.render(ROOT / "specs"), (
        "the conformance suite's catalogue is stale: run `python -m amc.conformance.catalogue specs`"
    )


def test_the_catalogue_reads_back_every_id_with_its_title_and_phase(tmp_path):
    specs = tmp_path / "specs"
    (specs / "requirements").mkdir(parents=True)
    (specs / "requirement-ids.txt").write_text(
        "# a comment\nA-ONE      First rule\nA-ONE/s1   Its scenario\nB-TWO      Later rule\n"
    )
    (specs / "requirements" / "a.md").write_text("# A\n\nPhase: now\n\n## A-ONE: First rule\n\n### A-ONE/s1: x\n")
    (specs / "requirements" / "b.md").write_text("# B\n\nPhase: later\n\n## B-TWO: Later rule\n")
    rendered = tmp_path / "requirements.txt"
    rendered.write_text(catalogue.render(specs))
    titles, later = catalogue.load(rendered)
    assert titles == {"A-ONE": "First rule", "A-ONE/s1": "Its scenario", "B-TWO": "Later rule"}
    assert later == {"B-TWO"}
