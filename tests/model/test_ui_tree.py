"""A uiautomator dump read into a Screen (amc.core.ui.tree): real-looking dumps, and generated ones."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest
from hypothesis import given
from hypothesis import strategies as st

from amc.core.ui.tree import DumpError, Element, parse_dump
from amc.sim import SimDeviceSpec
from amc.sim.screens import current_screen, hierarchy_xml
from tests.model.ui_trees import GenTree, on_screen, shown, trees

req = pytest.mark.req

# A Pixel's login screen as `uiautomator dump` writes it (trimmed to the attributes it always has).
PIXEL_LOGIN = """<?xml version='1.0' encoding='UTF-8' standalone='yes' ?><hierarchy rotation="0">\
<node index="0" text="" resource-id="" class="android.widget.FrameLayout" package="com.example.app" content-desc="" \
checkable="false" checked="false" clickable="false" enabled="true" focusable="false" focused="false" scrollable="false" \
long-clickable="false" password="false" selected="false" bounds="[0,0][1080,2400]">\
<node index="0" text="" resource-id="android:id/content" class="android.widget.FrameLayout" package="com.example.app" \
content-desc="" checkable="false" checked="false" clickable="false" enabled="true" focusable="false" focused="false" \
scrollable="false" long-clickable="false" password="false" selected="false" bounds="[0,63][1080,2400]">\
<node index="0" text="" resource-id="" class="android.widget.ImageButton" package="com.example.app" \
content-desc="Navigate up" checkable="false" checked="false" clickable="true" enabled="true" focusable="true" \
focused="false" scrollable="false" long-clickable="false" password="false" selected="false" bounds="[0,63][147,210]" />\
<node index="1" text="Example" resource-id="" class="android.widget.TextView" package="com.example.app" content-desc="" \
checkable="false" checked="false" clickable="false" enabled="true" focusable="false" focused="false" scrollable="false" \
long-clickable="false" password="false" selected="false" bounds="[189,105][420,168]" />\
<node index="2" text="Username" resource-id="com.example.app:id/username" class="android.widget.EditText" \
package="com.example.app" content-desc="" checkable="false" checked="false" clickable="true" enabled="true" \
focusable="true" focused="true" scrollable="false" long-clickable="true" password="false" selected="false" \
bounds="[42,300][1038,447]" />\
<node index="3" text="Remember me" resource-id="com.example.app:id/remember" class="android.widget.Switch" \
package="com.example.app" content-desc="" checkable="true" checked="true" clickable="true" enabled="true" \
focusable="true" focused="false" scrollable="false" long-clickable="false" password="false" selected="false" \
bounds="[42,480][1038,600]" />\
<node index="4" text="Log in" resource-id="com.example.app:id/login" class="android.widget.Button" \
package="com.example.app" content-desc="" checkable="false" checked="false" clickable="true" enabled="false" \
focusable="true" focused="false" scrollable="false" long-clickable="false" password="false" selected="false" \
bounds="[42,650][1038,797]" />\
<node index="5" text="" resource-id="com.example.app:id/list" class="androidx.recyclerview.widget.RecyclerView" \
package="com.example.app" content-desc="" checkable="false" checked="false" clickable="false" enabled="true" \
focusable="true" focused="false" scrollable="true" long-clickable="false" password="false" selected="false" \
bounds="[0,850][1080,2400]">\
<node index="0" text="" resource-id="" class="android.widget.LinearLayout" package="com.example.app" content-desc="" \
checkable="false" checked="false" clickable="false" enabled="true" focusable="false" focused="false" \
scrollable="false" long-clickable="false" password="false" selected="false" bounds="[0,850][1080,1000]">\
<node index="0" text="Item 1" resource-id="" class="android.widget.TextView" package="com.example.app" content-desc="" \
checkable="false" checked="false" clickable="false" enabled="true" focusable="false" focused="false" \
scrollable="false" long-clickable="false" password="false" selected="false" bounds="[42,880][1038,970]" />\
</node>\
<node index="1" text="Item 2 (off screen)" resource-id="" class="android.widget.TextView" package="com.example.app" \
content-desc="" checkable="false" checked="false" clickable="false" enabled="true" focusable="false" focused="false" \
scrollable="false" long-clickable="false" password="false" selected="false" bounds="[42,2400][1038,2550]" />\
<node index="2" text="Hidden" resource-id="" class="android.widget.TextView" package="com.example.app" content-desc="" \
checkable="false" checked="false" clickable="false" enabled="true" focusable="false" focused="false" \
scrollable="false" long-clickable="false" password="false" selected="false" bounds="[0,0][0,0]" />\
</node></node></node></hierarchy>"""


@req("UI/s12")
def test_a_real_dump_gives_the_compact_indexed_list_with_bounds_and_flags():
    screen = parse_dump(PIXEL_LOGIN)
    assert (screen.width, screen.height, screen.rotation) == (1080, 2400, 0)
    assert [e.line() for e in screen.elements] == [
        "[0] FrameLayout id=android:id/content bounds=[0,63][1080,2400]",
        '[1] ImageButton desc="Navigate up" bounds=[0,63][147,210] clickable',
        '[2] TextView "Example" bounds=[189,105][420,168]',
        '[3] EditText "Username" id=com.example.app:id/username bounds=[42,300][1038,447] clickable long-clickable focused editable',
        '[4] Switch "Remember me" id=com.example.app:id/remember bounds=[42,480][1038,600] clickable checkable checked',
        '[5] Button "Log in" id=com.example.app:id/login bounds=[42,650][1038,797] clickable disabled',
        "[6] RecyclerView id=com.example.app:id/list bounds=[0,850][1080,2400] scrollable",
        '[7] TextView "Item 1" bounds=[42,880][1038,970]',
    ]
    # The root and the row layout say nothing and react to nothing: nodes, outside the list.
    # The row below the screen and the empty one are neither.
    assert [(e.short_class, e.index) for e in screen.nodes if e.index == -1] == [
        ("FrameLayout", -1),
        ("LinearLayout", -1),
    ]
    assert len(screen.nodes) == 10
    assert screen.elements[5].to_json() == {
        "index": 5,
        "class": "android.widget.Button",
        "text": "Log in",
        "description": "",
        "resource_id": "com.example.app:id/login",
        "bounds": [42, 650, 1038, 797],
        "clickable": True,
        "long_clickable": False,
        "checkable": False,
        "checked": False,
        "focused": False,
        "scrollable": False,
        "enabled": False,
        "editable": False,
    }
    assert screen.elements[5].centre == (540, 723)


@req("UI/s12")
def test_the_screen_as_json_is_what_ui_tree_outputs():
    screen = parse_dump(PIXEL_LOGIN)
    out = json.loads(json.dumps(screen.to_json()))
    assert out["screen"] == {"width": 1080, "height": 2400, "rotation": 0}
    assert out["fingerprint"] == screen.fingerprint
    assert [e["index"] for e in out["elements"]] == list(range(8))


def test_the_simulators_dump_reads_as_a_screen():
    screen = parse_dump(hierarchy_xml(current_screen(SimDeviceSpec(serial="s"), "com.android.settings/.Settings", "")))
    assert (screen.width, screen.height) == (1080, 2400)
    assert [e.text for e in screen.elements if e.text] == [
        "Settings",
        "Network & internet",
        "Connected devices",
        "Display",
        "Battery",
    ]
    assert [e.short_class for e in screen.elements if e.clickable] == ["LinearLayout"] * 4


def test_landscape_takes_its_size_from_the_root_and_its_rotation_from_the_hierarchy():
    xml = '<hierarchy rotation="1"><node class="android.widget.FrameLayout" bounds="[0,0][2400,1080]" /></hierarchy>'
    screen = parse_dump(xml)
    assert (screen.width, screen.height, screen.rotation) == (2400, 1080, 1)
    assert screen.elements == () and len(screen.nodes) == 1


def test_an_empty_hierarchy_is_an_empty_screen():
    screen = parse_dump('<hierarchy rotation="0"/>')
    assert (screen.nodes, screen.elements, screen.width, screen.height) == ((), (), 0, 0)


@pytest.mark.parametrize(
    "dump, says",
    [
        (b"<hierarchy><node", "not well-formed XML"),
        (b"", "not well-formed XML"),
        (b"<html/>", "root is <html>, not <hierarchy>"),
    ],
)
def test_a_dump_that_is_not_a_hierarchy_is_an_error_that_says_so(dump, says):
    with pytest.raises(DumpError, match=says):
        parse_dump(dump)
    assert issubclass(DumpError, ValueError)


def test_a_label_with_quotes_or_newlines_stays_on_one_line():
    xml = (
        '<hierarchy><node text="say &quot;hi&quot;&#10;twice" content-desc="d" class="a.b.Button" '
        'clickable="true" bounds="[0,0][10,20]" /></hierarchy>'
    )
    (element,) = parse_dump(xml).elements
    assert element.line() == '[0] Button "say \\"hi\\"\\ntwice" desc="d" bounds=[0,0][10,20] clickable'


@req("UI/s12")
@given(trees())
def test_nodes_are_those_on_the_screen_and_the_list_those_worth_showing_in_document_order(tree: GenTree):
    screen = parse_dump(tree.xml())
    expected = on_screen(tree)
    assert [n.package for n in screen.nodes] == [f"p{n.serial}" for n in expected]
    assert [e.package for e in screen.elements] == [f"p{n.serial}" for n in expected if shown(n)]
    assert [e.index for e in screen.elements] == list(range(len(screen.elements)))
    assert [n for n in screen.nodes if n.index >= 0] == list(screen.elements)
    for node in screen.nodes:
        left, top, right, bottom = node.bounds
        assert min(right, screen.width) > max(left, 0) and min(bottom, screen.height) > max(top, 0)
        assert node.editable == node.cls.endswith("EditText")


@req("UI/s4")
@given(trees(max_nodes=8), trees(max_nodes=8))
def test_the_fingerprint_is_equal_exactly_when_the_compact_lists_are(a: GenTree, b: GenTree):
    first, second = parse_dump(a.xml()), parse_dump(b.xml())
    assert parse_dump(a.xml()).fingerprint == first.fingerprint  # deterministic
    same = first.to_json() | {"fingerprint": ""} == second.to_json() | {"fingerprint": ""} and [
        e.package for e in first.elements
    ] == [e.package for e in second.elements]
    assert (first.fingerprint == second.fingerprint) == same


@req("UI/s4")
@given(trees(), st.data())
def test_changing_one_shown_attribute_changes_the_fingerprint(tree: GenTree, data: st.DataObject):
    screen = parse_dump(tree.xml())
    shown_nodes = [n for n in on_screen(tree) if shown(n)]
    if not shown_nodes:
        return
    node = data.draw(st.sampled_from(shown_nodes))
    name, value = data.draw(
        st.sampled_from(
            [
                ("text", node.attributes.get("text", "") + "!"),
                ("checked", "false" if node.attributes.get("checked") == "true" else "true"),
                ("focused", "false" if node.attributes.get("focused") == "true" else "true"),
            ]
        )
    )
    changed = parse_dump(replace(tree, root=tree.root.with_node(node.serial, **{name: value})).xml())
    assert changed.fingerprint != screen.fingerprint


def test_element_is_a_value():
    element = parse_dump(PIXEL_LOGIN).elements[3]
    assert isinstance(element, Element)
    assert element == parse_dump(PIXEL_LOGIN).elements[3]
    assert hash(element) == hash(parse_dump(PIXEL_LOGIN).elements[3])
