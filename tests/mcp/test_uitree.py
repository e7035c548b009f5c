"""The UI tree made compact (amc.mcp.uitree), on the simulator's own uiautomator dumps."""

from __future__ import annotations

import pytest

from amc.mcp import uitree
from amc.sim import SimDeviceSpec
from amc.sim.screens import current_screen, hierarchy_xml

SETTINGS = "com.android.settings/.Settings"


def settings_dump() -> bytes:
    return hierarchy_xml(current_screen(SimDeviceSpec(serial="s"), SETTINGS, ""))


def test_compact_keeps_the_elements_with_text_id_or_a_click_handler_and_their_bounds():
    elements = uitree.compact(settings_dump())
    labelled = [e for e in elements if e.text]
    assert [e.text for e in labelled] == ["Settings", "Network & internet", "Connected devices", "Display", "Battery"]
    display = labelled[3]
    assert (display.resource_id, display.cls, display.bounds, display.centre) == (
        "android:id/title",
        "TextView",
        (54, 650, 1026, 750),
        (540, 700),
    )
    # The rows are clickable layouts with neither text nor id: kept, so a model sees what reacts to a tap.
    rows = [e for e in elements if e.clickable]
    assert len(rows) == 4 and all(e.cls == "LinearLayout" and not e.text for e in rows)
    # The root FrameLayout has nothing to show and is dropped; indexes count what is kept.
    assert "FrameLayout" not in {e.cls for e in elements}
    assert [e.index for e in elements] == list(range(len(elements)))


def test_render_is_one_line_per_element_with_the_centre_to_tap():
    text = uitree.render(uitree.compact(settings_dump()))
    assert '] TextView "Network & internet" id=android:id/title bounds=[54,250][1026,350] centre=540,300' in text
    assert len(text.splitlines()) == len(uitree.compact(settings_dump()))
    assert "no element" in uitree.render([])


def test_matching_is_exact_first_then_ignores_case_and_says_when_several_match():
    elements = uitree.compact(settings_dump())
    assert [e.text for e in uitree.matching(elements, text="Display")] == ["Display"]
    assert [e.text for e in uitree.matching(elements, text="  display ")] == ["Display"]
    assert uitree.matching(elements, text="Disp") == []  # no substring: "Display size" must not be tapped for "Display"
    titles = uitree.matching(elements, resource_id="android:id/title")
    assert len(titles) == 4
    assert [e.text for e in uitree.matching(elements, text="Battery", resource_id="android:id/title")] == ["Battery"]
    assert uitree.matching(elements, text="Battery", resource_id="com.android.settings:id/toolbar_title") == []
    with pytest.raises(ValueError):
        uitree.matching(elements)


def test_a_label_with_quotes_or_newlines_stays_on_one_line():
    xml = (
        '<hierarchy><node text="say &quot;hi&quot;&#10;twice" content-desc="d" resource-id="" class="a.b.Button" '
        'clickable="true" bounds="[0,0][10,20]" /></hierarchy>'
    )
    (element,) = uitree.compact(xml)
    assert element.line() == '[0] Button "say \\"hi\\"\\ntwice" desc="d" bounds=[0,0][10,20] centre=5,10 clickable'


@pytest.mark.parametrize(
    "dump, says",
    [(b"<hierarchy><node", "not well-formed XML"), (b"<html/>", "root is <html>, not <hierarchy>")],
)
def test_a_dump_that_is_not_a_hierarchy_is_an_error_that_says_so(dump, says):
    with pytest.raises(uitree.UiTreeError, match=says):
        uitree.compact(dump)
