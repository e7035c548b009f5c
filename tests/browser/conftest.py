"""A real local stack for the browser tests, as `amc up` runs it: `amc serve` and a Host
Agent as processes, two simulated phones, and a tokens file with two tenants.

- `stack`: the running stack (module scope: it starts in a few seconds, and the tests
  share it, each with tasks of its own) with a `Caller` per token;
- `page`: a new browser tab (its own sessionStorage), which fails its test when a dialog
  opens (no page of the console opens one, so a dialog means injected script ran);
- `sign_in(page, token)`: opens the console and signs in.
"""

from __future__ import annotations

import json
import os
import secrets
from pathlib import Path

import pytest
from playwright.sync_api import expect

from amc.cli.client import ApiClient
from amc.cli.launch import Stack
from tests.support.browser import chromium  # noqa: F401  (a fixture)
from tests.support.http import Caller, http_client

DOCS = Path(__file__).resolve().parents[2] / "docs"


class ConsoleStack:
    def __init__(self, url: str, tokens: dict[str, str], lines: list[str]):
        self.url = url
        self.console = url + "/ui"
        self.tokens = tokens
        self.lines = lines
        self.http = http_client(url)
        self.admin = Caller(self.http, tokens["admin"], "admin")
        self.acme = Caller(self.http, tokens["acme"], "acme")
        self.globex = Caller(self.http, tokens["globex"], "globex")
        self.h9 = Caller(self.http, tokens["h9"], "h9")  # a host the tests play themselves


@pytest.fixture(scope="module")
def stack(tmp_path_factory, chromium):  # noqa: F811  (chromium first: no stack without a browser)
    work = tmp_path_factory.mktemp("console-stack")
    tokens = {name: secrets.token_urlsafe(24) for name in ("admin", "acme", "globex", "h1", "h9")}
    entries = [
        {"token": tokens["admin"], "role": "admin"},
        {"token": tokens["acme"], "role": "client", "tenant": "acme"},
        {"token": tokens["globex"], "role": "client", "tenant": "globex"},
        {"token": tokens["h1"], "role": "host", "host_id": "h1"},
        {"token": tokens["h9"], "role": "host", "host_id": "h9"},
    ]
    path = work / "tokens.json"
    path.write_text(json.dumps(entries))
    path.chmod(0o600)
    lines: list[str] = []
    with Stack(lambda name, line: lines.append(f"{name}: {line}")) as running:
        url = running.start_server(work / "store", tokens=path, lease_seconds=3, host_timeout=30)
        simulator = running.start_simulator(2)
        running.start_agent(
            "h1",
            tokens["h1"],
            adb_port=simulator.server_port,
            claim_wait=2,
            drain_timeout=1,
            log_level="warning",
        )
        with ApiClient(url, tokens["admin"]) as admin:
            running.wait_registered(admin, "h1", 2)
        console = ConsoleStack(url, tokens, lines)
        try:
            yield console
        finally:
            console.http.close()


@pytest.fixture
def page(chromium):  # noqa: F811
    context = chromium.new_context(viewport={"width": 1280, "height": 900})
    tab = context.new_page()
    dialogs: list[str] = []
    tab.on("dialog", lambda dialog: (dialogs.append(dialog.message), dialog.dismiss()))
    errors: list[str] = []
    tab.on("pageerror", lambda error: errors.append(str(error)))
    tab.set_default_timeout(15_000)
    # `expect` has its own timeout (5 s by default); a two-core CI machine running the other
    # half of the suite beside the browser needs the same margin as the page's actions.
    expect.set_options(timeout=15_000)
    yield tab
    context.close()
    assert dialogs == [], f"a dialog opened: {dialogs}"
    assert errors == [], f"the page threw: {errors}"


@pytest.fixture
def sign_in(stack):
    def open_signed_in(tab, token: str, where: str = "") -> None:
        tab.goto(stack.console + where)
        tab.fill("#token", token)
        tab.click("#sign-in button[type=submit]")
        tab.wait_for_selector("#nav:not([hidden])")

    return open_signed_in


def snapshot(tab, name: str, full_page: bool = False) -> None:
    """Save the page as docs/console-<name>.png, the pictures the README and docs/console.md show, when
    AMC_CONSOLE_PICTURES=1 (`make console-pictures`): a plain test run leaves the checkout as it was."""
    if os.environ.get("AMC_CONSOLE_PICTURES") == "1":
        tab.screenshot(path=str(DOCS / f"console-{name}.png"), full_page=full_page)
