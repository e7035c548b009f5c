"""The web console's files as the server serves them (the browser tests drive the page itself:
tests/browser)."""

from __future__ import annotations

import re
from importlib import resources

import pytest

from amc.adapters.http.routes.console import CONTENT_SECURITY_POLICY

CONSOLE = resources.files("amc.adapters.http.console")


@pytest.mark.req("CONSOLE/s1")
def test_the_console_loads_without_a_token_under_a_strict_policy(amc):
    root = amc.http.get("/", follow_redirects=False)
    assert root.status_code == 302 and root.headers["location"] == "/ui"
    for path, media in (
        ("/ui", "text/html"),
        ("/ui/", "text/html"),
        ("/ui/app.js", "text/javascript"),
        ("/ui/app.css", "text/css"),
    ):
        response = amc.http.get(path)  # no Authorization header
        assert response.status_code == 200, path
        assert response.headers["content-type"].startswith(media)
        assert response.headers["content-security-policy"] == CONTENT_SECURITY_POLICY
        assert response.headers["x-content-type-options"] == "nosniff"
        assert response.headers["referrer-policy"] == "no-referrer"
    policy = dict(part.split(" ", 1) for part in CONTENT_SECURITY_POLICY.split("; "))
    assert policy["script-src"] == "'self'" and policy["style-src"] == "'self'"
    assert policy["frame-ancestors"] == "'none'" and policy["connect-src"] == "'self'"
    # Recordings play only from blobs the page fetched with the token: nothing else, not even this origin.
    assert policy["media-src"] == "blob:" and policy["img-src"] == "'self' blob:"
    assert amc.http.get("/ui/nothing.js").status_code == 404
    assert amc.http.get("/ui/../v1/tasks").status_code in (401, 404)
    amc.anon.tasks(expect=401)  # the API still needs its token


def test_the_page_has_no_inline_script_or_style_and_every_module_it_imports_ships():
    """What the policy forbids is not there, and no import points outside the package."""
    page = CONSOLE.joinpath("index.html").read_text()
    assert not re.search(r"<script(?![^>]*\bsrc=)", page), "an inline script"
    assert "<style" not in page and " style=" not in page and "javascript:" not in page
    names = {entry.name for entry in CONSOLE.iterdir()}
    for name in [n for n in names if n.endswith(".js")]:
        source = CONSOLE.joinpath(name).read_text()
        assert "innerHTML" not in source and "outerHTML" not in source and "insertAdjacentHTML" not in source, name
        assert "eval(" not in source and "new Function" not in source, name
        for imported in re.findall(r"""from\s+["']\./([\w.-]+)["']""", source):
            assert imported in names, f"{name} imports {imported}, which the package lacks"
    for linked in re.findall(r"""(?:src|href)="/ui/([\w.-]+)\"""", page):
        assert linked in names
