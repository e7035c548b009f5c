"""Selectors matched against screens (amc.core.ui.selectors): a naive reference over generated
dumps, the index rule against observed and fresh fingerprints, and the no-match sentence."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from amc.core.ui.selectors import NO_OBSERVATION, SCREEN_CHANGED, Found, NotFound, excerpt, find_all, resolve
from amc.core.ui.target import Selector, parse_target
from amc.core.ui.tree import parse_dump, quoted
from tests.model.ui_trees import SELECTOR_VALUES, GenNode, GenTree, on_screen, shown, texts_xml, trees

req = pytest.mark.req

MATCHING_KEYS = ["text", "text_contains", "resource_id", "description", "class"]


def naive_match(key: str, value: str, node: GenNode) -> bool:
    """The contract's matching rules, spelt out once more, on the generated node's raw attributes."""
    a = node.attributes
    text, description = a.get("text", ""), a.get("content-desc", "")
    resource_id, cls = a.get("resource-id", ""), a.get("class", "")
    if key == "text":
        return text == value
    if key == "text_contains":
        return value.casefold() in text.casefold() or value.casefold() in description.casefold()
    if key == "resource_id":
        # "ends in :id/ and the value" (specs/protocol.md); for the usual ids, the part after ":id/".
        return value == resource_id or resource_id[-len(value) - 4 :] == ":id/" + value
    if key == "description":
        return description == value
    assert key == "class"
    return value in (cls, cls.split(".")[-1])


def serials(nodes: list[GenNode]) -> list[str]:
    return [f"p{node.serial}" for node in nodes]


@st.composite
def selectors(draw: st.DrawFn, tree: GenTree) -> Selector:
    """A selector aimed, mostly, at some node of `tree`: one of its values, a part or a changed case of one."""
    key = draw(st.sampled_from(MATCHING_KEYS))
    node = draw(st.sampled_from(tree.nodes()))
    raw = [node.attributes.get(name, "") for name in ("text", "content-desc", "resource-id", "class")]
    near = [part for value in raw for part in (value, *value.split(":id/"), value.split(".")[-1]) if part]
    value = draw(st.sampled_from(near) if near and draw(st.booleans()) else st.sampled_from(SELECTOR_VALUES))
    if draw(st.booleans()):
        start = draw(st.integers(0, len(value) - 1))
        value = value[start : draw(st.integers(start + 1, len(value)))]
    value = draw(st.sampled_from([value, value.upper(), value.lower(), value.casefold()]))
    return Selector(key=key, value=value, nth=draw(st.none() | st.integers(0, 3)))


@req("UI/s2")
@given(trees(), st.data())
def test_the_matcher_agrees_with_a_naive_reference_on_every_key_and_nth(tree: GenTree, data: st.DataObject):
    screen = parse_dump(tree.xml())
    selector = data.draw(selectors(tree))
    assert isinstance(selector.value, str)
    expected = [node for node in on_screen(tree) if naive_match(selector.key, selector.value, node)]
    assert [node.package for node in find_all(selector, screen)] == serials(expected)
    outcome = resolve(selector, screen, None)  # observed is for index selectors only
    nth = selector.nth or 0
    if nth < len(expected):
        assert isinstance(outcome, Found)
        assert outcome.element.package == f"p{expected[nth].serial}"  # the nth match, first by default
        left, top, right, bottom = outcome.element.bounds
        x, y = outcome.point
        assert left <= x < right and top <= y < bottom  # the point is on the element ...
        assert 0 <= x < screen.width and 0 <= y < screen.height  # ... and on the screen
    else:
        assert isinstance(outcome, NotFound)
        assert outcome.reason.startswith(f"no element matches {selector.describe()}")


@req("UI/s2")
def test_several_matches_without_nth_give_the_first_in_document_order_and_nth_picks_among_them():
    screen = parse_dump(texts_xml("Item 1", "Item 10", "Other", "Item 1"))
    first = resolve(parse_target({"text": "Item 1"}), screen, None)
    assert isinstance(first, Found) and first.element.index == 0 and first.point == (540, 50)
    last = resolve(parse_target({"text": "Item 1", "nth": 1}), screen, None)
    assert isinstance(last, Found) and last.element.index == 3
    contains = resolve(parse_target({"text_contains": "ITEM 1", "nth": 1}), screen, None)
    assert isinstance(contains, Found) and contains.element.text == "Item 10"
    beyond = resolve(parse_target({"text": "Item 1", "nth": 2}), screen, None)
    assert beyond == NotFound('no element matches text "Item 1" (nth 2): 2 elements match text "Item 1"')


@req("UI/s2")
def test_resource_id_in_full_or_after_id_and_class_in_full_or_its_last_component():
    xml = (
        '<hierarchy rotation="0"><node class="android.widget.FrameLayout" bounds="[0,0][100,100]">'
        '<node resource-id="com.example.app:id/login" class="android.widget.Button" bounds="[0,0][50,50]" />'
        '<node resource-id="login" class="com.example.Login" bounds="[50,50][100,100]" /></node></hierarchy>'
    )
    screen = parse_dump(xml)

    def packages(raw: dict[str, str]) -> list[str]:
        return [e.cls for e in find_all(parse_target(raw), screen)]

    assert packages({"resource_id": "login"}) == ["android.widget.Button", "com.example.Login"]
    assert packages({"resource_id": "com.example.app:id/login"}) == ["android.widget.Button"]
    assert packages({"resource_id": "app:id/login"}) == []
    assert packages({"class": "Button"}) == ["android.widget.Button"]
    assert packages({"class": "widget.Button"}) == []
    assert packages({"class": "FrameLayout"}) == ["android.widget.FrameLayout"]  # not in the compact list, still a node


@req("UI/s2")
def test_a_node_off_the_screen_or_without_area_never_matches():
    xml = (
        '<hierarchy rotation="0"><node class="android.widget.FrameLayout" bounds="[0,0][100,100]">'
        '<node text="below" class="android.widget.TextView" bounds="[0,100][100,150]" />'
        '<node text="empty" class="android.widget.TextView" bounds="[10,10][10,20]" />'
        '<node text="half" class="android.widget.TextView" bounds="[50,80][100,140]" /></node></hierarchy>'
    )
    screen = parse_dump(xml)
    assert isinstance(resolve(parse_target({"text": "below"}), screen, None), NotFound)
    assert isinstance(resolve(parse_target({"text": "empty"}), screen, None), NotFound)
    half = resolve(parse_target({"text": "half"}), screen, None)
    assert isinstance(half, Found) and half.point == (75, 90)  # the centre of its visible part


@req("UI/s3")
def test_no_match_says_what_the_screen_showed():
    screen = parse_dump(texts_xml("Example", "Username", "Details"))
    outcome = resolve(parse_target({"text": "Log in"}), screen, None)
    assert outcome == NotFound(
        'no element matches text "Log in"; the screen showed: "Example", "Username", "Details" (3 elements)'
    )


@req("UI/s3")
def test_the_excerpt_is_short_and_counts_every_element():
    rows = [f"Item {i}" for i in range(1, 41)] + ["Item 1", "x" * 60]
    screen = parse_dump(texts_xml(*rows, height=100 * len(rows)))
    said = excerpt(screen)
    assert said.startswith('the screen showed: "Item 1", "Item 2", ')
    assert said.endswith('"Item 12", ... (42 elements)')
    assert excerpt(screen, limit=2) == 'the screen showed: "Item 1", "Item 2", ... (42 elements)'
    assert excerpt(parse_dump(texts_xml("x" * 60))) == f'the screen showed: "{"x" * 39}…" (1 element)'
    assert excerpt(parse_dump(texts_xml())) == "the screen showed no text (0 elements)"
    with pytest.raises(ValueError):
        excerpt(screen, limit=0)


@req("UI/s3")
@given(trees())
def test_the_excerpt_names_labels_of_the_screen_only_and_its_element_count(tree: GenTree):
    screen = parse_dump(tree.xml())
    said = excerpt(screen)
    assert said.endswith(f"({len(screen.elements)} element{'' if len(screen.elements) == 1 else 's'})")
    labels = [n.attributes.get("text") or n.attributes.get("content-desc") for n in on_screen(tree) if shown(n)]
    for label in filter(None, labels[:12]):
        assert quoted(label) in said


@req("UI/s4")
@given(trees(), st.integers(0, 20))
def test_an_index_acts_on_the_observed_list_when_the_fresh_dump_has_its_fingerprint(tree: GenTree, index: int):
    observed, fresh = parse_dump(tree.xml()), parse_dump(tree.xml())
    outcome = resolve(Selector(key="index", value=index), fresh, observed)
    if index < len(observed.elements):
        assert isinstance(outcome, Found)
        assert outcome.element == observed.elements[index]
        left, top, right, bottom = outcome.element.bounds
        assert left <= outcome.point[0] < right and top <= outcome.point[1] < bottom
    else:
        assert outcome == NotFound(
            f"there is no element [{index}]: the last observation listed {len(observed.elements)} "
            f"element{'' if len(observed.elements) == 1 else 's'}"
        )
    assert resolve(Selector(key="index", value=index), fresh, None) == NotFound(NO_OBSERVATION)


@req("UI/s4")
@given(trees(max_nodes=8), trees(max_nodes=8), st.integers(0, 20))
def test_an_index_is_refused_when_the_screen_changed_since_the_observation(a: GenTree, b: GenTree, index: int):
    observed, fresh = parse_dump(a.xml()), parse_dump(b.xml())
    outcome = resolve(Selector(key="index", value=index), fresh, observed)
    if observed.fingerprint != fresh.fingerprint:
        assert outcome == NotFound(SCREEN_CHANGED)
    else:
        assert not isinstance(outcome, NotFound) or "no element" in outcome.reason


@req("UI/s4")
def test_an_index_after_a_change_is_refused_even_where_the_element_is_the_same():
    before = parse_dump(texts_xml("Log in", "Details"))
    after = parse_dump(texts_xml("Log in", "Details", "Welcome"))
    assert resolve(parse_target({"index": 0}), after, before) == NotFound(SCREEN_CHANGED)
    assert resolve(parse_target({"index": 0, "nth": 1}), before, before) == NotFound(
        "element [0] has no nth 1: an index names one element, so only nth 0 can match"
    )


def test_find_all_refuses_an_index_selector():
    with pytest.raises(ValueError, match="is an index"):
        find_all(parse_target({"index": 0}), parse_dump(texts_xml("A")))
