"""What changed between two screens (amc.core.ui.diff), over generated dumps and their edits."""

from __future__ import annotations

from collections import Counter
from dataclasses import replace

import attrs
import pytest
from hypothesis import given
from hypothesis import strategies as st

from amc.core.ui.diff import TreeDiff, diff
from amc.core.ui.tree import Element, Screen, parse_dump
from tests.model.ui_trees import GenNode, GenTree, node_attributes, on_screen, shown, texts_xml, trees

req = pytest.mark.req


@st.composite
def edited(draw: st.DrawFn) -> tuple[GenTree, GenTree]:
    """A screen and the same screen after a few edits: flags flipped, nodes moved, retitled, removed or added."""
    before = draw(trees(max_nodes=12))
    root = before.root
    serial = 1000
    for _ in range(draw(st.integers(0, 4))):
        nodes = [node.serial for node in root.preorder()]
        target = draw(st.sampled_from(nodes))
        edit = draw(st.sampled_from(["flag", "bounds", "text", "remove", "add"]))
        if edit == "flag":
            flag = draw(st.sampled_from(["checked", "focused", "enabled", "clickable", "scrollable"]))
            root = root.with_node(target, **{flag: draw(st.sampled_from(["true", "false"]))})
        elif edit == "bounds" and target != 0:
            left, top = draw(st.integers(0, before.width - 1)), draw(st.integers(0, before.height - 1))
            right, bottom = draw(st.integers(left + 1, before.width)), draw(st.integers(top + 1, before.height))
            root = root.with_node(target, bounds=f"[{left},{top}][{right},{bottom}]")
        elif edit == "text":
            root = root.with_node(target, text=draw(st.sampled_from(["Ready", "Loading…", ""])))
        elif edit == "remove" and target != 0:
            root = root.without_node(target)
        elif edit == "add":
            serial += 1
            child = GenNode(serial, draw(node_attributes(before.width, before.height)))
            root = root.with_child(target, child, draw(st.integers(0, 3)))
    return before, replace(before, root=root)


def without_index(element: Element) -> Element:
    return attrs.evolve(element, index=-1)


def turned(d: TreeDiff) -> set[tuple[Element, Element]]:
    return {(after, before) for before, after in d.changed}


@req("UI/s12")
@given(trees())
def test_a_screen_against_itself_has_no_difference_and_against_nothing_is_all_added(tree: GenTree):
    screen = parse_dump(tree.xml())
    assert diff(screen, parse_dump(tree.xml())) == TreeDiff((), (), ())
    assert diff(screen, screen).empty
    assert diff(None, screen) == TreeDiff(added=screen.elements, removed=(), changed=())


@req("UI/s12")
@given(edited())
def test_reversed_the_diff_swaps_added_and_removed_and_turns_each_change_round(pair: tuple[GenTree, GenTree]):
    a, b = (parse_dump(tree.xml()) for tree in pair)
    forward, backward = diff(a, b), diff(b, a)
    assert backward.added == forward.removed
    assert backward.removed == forward.added
    assert set(backward.changed) == turned(forward)


@req("UI/s12")
@given(edited())
def test_the_counts_add_up_and_every_change_is_a_real_one(pair: tuple[GenTree, GenTree]):
    a, b = (parse_dump(tree.xml()) for tree in pair)
    d = diff(a, b)
    paired = len(a.elements) - len(d.removed)
    assert paired == len(b.elements) - len(d.added) >= len(d.changed)
    # Every element of each side is accounted for at most once.
    assert not Counter(d.removed + tuple(old for old, _ in d.changed)) - Counter(a.elements)
    assert not Counter(d.added + tuple(new for _, new in d.changed)) - Counter(b.elements)
    for old, new in d.changed:
        assert without_index(old) != without_index(new)
    # What is left paired and unchanged is the same multiset on both sides (up to index).
    unchanged_a = Counter(map(without_index, a.elements)) - Counter(map(without_index, d.removed))
    unchanged_a -= Counter(without_index(old) for old, _ in d.changed)
    unchanged_b = Counter(map(without_index, b.elements)) - Counter(map(without_index, d.added))
    unchanged_b -= Counter(without_index(new) for _, new in d.changed)
    assert unchanged_a == unchanged_b
    assert [new.index for _, new in d.changed] == sorted(new.index for _, new in d.changed)
    assert [e.index for e in d.added] == sorted(e.index for e in d.added)


@req("UI/s12")
@given(trees(), st.data())
def test_an_element_whose_only_change_is_a_flag_or_its_bounds_is_changed(tree: GenTree, data: st.DataObject):
    listed = [node for node in on_screen(tree) if shown(node) and node.serial != 0]
    if not listed:
        return
    node = data.draw(st.sampled_from(listed))
    if data.draw(st.booleans()):
        flag = data.draw(st.sampled_from(["checked", "focused", "enabled"]))
        edit = {flag: "false" if node.attributes.get(flag) == "true" else "true"}
    else:
        left, top = data.draw(st.integers(0, tree.width - 2)), data.draw(st.integers(0, tree.height - 2))
        edit = {"bounds": f"[{left},{top}][{left + 1},{top + 1}]"}
    before = parse_dump(tree.xml())
    after = parse_dump(replace(tree, root=tree.root.with_node(node.serial, **edit)).xml())
    d = diff(before, after)
    if before.elements == after.elements:  # the bounds drawn were the ones it had
        assert d.empty
        return
    (moved,) = (e for e in after.elements if e.package == f"p{node.serial}")
    assert (d.added, d.removed) == ((), ())
    assert len(d.changed) == 1 and d.changed[0][1] == moved
    (original,) = (e for e in before.elements if e.package == f"p{node.serial}")
    assert without_index(d.changed[0][0]) == without_index(original)


def status_screen(status: str, *rows: str) -> Screen:
    xml = texts_xml(*rows).replace(
        "</node></hierarchy>",
        f'<node text="{status}" resource-id="com.example.app:id/status" class="android.widget.TextView" '
        'bounds="[0,2000][1080,2100]" /></node></hierarchy>',
    )
    return parse_dump(xml)


@req("UI/s12")
def test_a_view_that_shows_another_text_is_changed_and_rows_that_came_or_went_are_added_or_removed():
    before = status_screen("Loading…", "Item 1", "Item 2", "Item 3")
    after = status_screen("Ready", "Item 2", "Item 3", "Item 4")
    d = diff(before, after)
    assert [e.text for e in d.removed] == ["Item 1"]
    assert [e.text for e in d.added] == ["Item 4"]
    assert [(old.text, new.text) for old, new in d.changed] == [
        ("Item 2", "Item 2"),
        ("Item 3", "Item 3"),
        ("Loading…", "Ready"),
    ]
    assert [new.bounds[1] for _, new in d.changed[:2]] == [0, 100]  # the rows moved up one
    assert d.to_json()["changed"][2] == {
        "before": before.elements[3].to_json(),
        "after": after.elements[3].to_json(),
    }
    assert [e["text"] for e in d.to_json()["added"]] == ["Item 4"]
    assert [e["text"] for e in d.to_json()["removed"]] == ["Item 1"]
