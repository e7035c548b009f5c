"""The conformance suite's pytest plugin: its command-line options and its report.

Options (each also read from an environment variable, so a CI job can set them once):

    --target-url URL          the server under test (AMC_CONFORMANCE_URL); default: start
                              our own `amc serve` for the run
    --tokens FILE             the specs/protocol.md tokens file for that server
                              (AMC_CONFORMANCE_TOKENS): two client tenants, two hosts, an admin
    --conformance-report FILE where to write the JSON report (AMC_CONFORMANCE_REPORT);
                              default: amc-conformance-report.json in the temp directory
    --restart-command CMD     a shell command that restarts the target and keeps its data
                              (AMC_CONFORMANCE_RESTART); enables the restart scenarios
    --server-clock KIND       manual | system: the clock of the server the suite starts
                              itself (ignored with --target-url); default manual
    --host-timeout SECONDS    the target's host timeout (AMC_CONFORMANCE_HOST_TIMEOUT), for
                              the scenario of a host that goes silent; default 60, the
                              protocol's (the server the suite starts itself: its own)

The report: every test carries the requirement ids it checks (``@pytest.mark.req(...)``).
At the end of the run the plugin lists every id of the catalogue (`catalogue`, rendered from
the repository's specs/requirement-ids.txt and shipped with the package) as passed,
failed, skipped or not applicable, with the reason, prints that table and writes it as
JSON. A requirement (``CANCEL-QUEUED``) takes the combined outcome of its own tests and
its scenarios' (``CANCEL-QUEUED/s1``): failed if any failed, skipped if all were skipped,
else passed.

The conformance conftest registers this plugin; a root conftest may register it as well
(``pytest_plugins = ["amc.conformance.plugin"]``) so that the options are known to a
run started from the repository root. Registering twice is harmless.
"""

from __future__ import annotations

import json
import os
import tempfile
import time
from pathlib import Path
from typing import Any

import pytest

from amc.conformance.catalogue import load as load_catalogue

HERE = Path(__file__).resolve().parent
PLUGIN_NAME = "amc-conformance-report"

NOT_APPLICABLE = "a duty of the Host Agent, not a rule a server can be checked for"
# Requirements that only a Host Agent's behaviour can meet (which calls crossed an admission
# boundary, what a policy refusal is reported as, what an on-screen action did on the device):
# the server only records what it is told. SESSION/s11: amc's Host Agent in a session;
# UI/s2-UI/s12: running the on-screen actions (the server's part, their arguments, is UI/s1
# and UI/s13).
AGENT_REQUIREMENTS = ("AGENT-", "INPUT-CACHE")  # the Host Agent's duties, with all their scenarios
AGENT_ONLY = frozenset({"BOUNDARY/s1", "BOUNDARY/s3", "SESSION/s11", *(f"UI/s{n}" for n in range(2, 13))})
# Requirements of a client of the protocol (amc mcp), which a server cannot be checked for either.
CLIENT_ONLY = frozenset({"UI/s14"})
NOT_A_SERVERS = "a duty of a client (amc mcp), not a rule a server can be checked for"
LATER = "phase later (specs/protocol.md Part B): specified, not checked by this version of the suite"

OPTIONS = [
    ("--target-url", "AMC_CONFORMANCE_URL", "URL of the server under test (default: start our own amc serve)"),
    ("--tokens", "AMC_CONFORMANCE_TOKENS", "tokens file of that server: two client tenants, two hosts, one admin"),
    ("--conformance-report", "AMC_CONFORMANCE_REPORT", "where to write the JSON report by requirement id"),
    ("--restart-command", "AMC_CONFORMANCE_RESTART", "shell command that restarts the target keeping its data"),
    ("--server-clock", "AMC_CONFORMANCE_SERVER_CLOCK", "manual | system: clock of the server the suite starts"),
    ("--host-timeout", "AMC_CONFORMANCE_HOST_TIMEOUT", "seconds: the target's host timeout (default 60)"),
]


def add_options(parser: pytest.Parser) -> None:
    group = parser.getgroup("amc-conformance", "amc conformance suite")
    for flag, env, text in OPTIONS:
        try:
            group.addoption(flag, action="store", default=None, help=f"{text} [env {env}]")
        except ValueError:  # already added: the plugin is registered at the root too
            return


def option(config: pytest.Config, flag: str) -> str | None:
    """An option's value: the command line, else its environment variable."""
    env = next(env for name, env, _ in OPTIONS if name == flag)
    try:
        value = config.getoption(flag)
    except ValueError:  # not registered (this conftest was not an initial one)
        value = None
    return value if value is not None else (os.environ.get(env) or None)


def pytest_addoption(parser: pytest.Parser) -> None:
    add_options(parser)


def pytest_configure(config: pytest.Config) -> None:
    register(config)


def register(config: pytest.Config) -> ConformanceReport:
    config.addinivalue_line("markers", "conformance_meta: a test of the conformance suite itself (not in the report)")
    config.addinivalue_line("markers", "req(id): the requirement scenario ids this test checks")
    plugin = config.pluginmanager.get_plugin(PLUGIN_NAME)
    if plugin is None:
        plugin = ConformanceReport(config)
        config.pluginmanager.register(plugin, PLUGIN_NAME)
    return plugin


# ---------------------------------------------------------------------------------------
# The requirement catalogue


def catalogue() -> tuple[dict[str, str], set[str]]:
    """Every requirement id with its title, and the ids of phase-later documents (packaged)."""
    return load_catalogue()


def parent(ident: str) -> str:
    return ident.split("/")[0]


# ---------------------------------------------------------------------------------------
# The report


class ConformanceReport:
    """Collects each conformance test's requirement ids and outcome; reports by id."""

    def __init__(self, config: pytest.Config):
        self.config = config
        self.ids_of: dict[str, list[str]] = {}  # nodeid -> requirement ids
        self.doc_of: dict[str, str] = {}  # nodeid -> first docstring line
        self.results: dict[str, dict[str, str]] = {}  # nodeid -> {"outcome", "why"}
        self.run: dict[str, Any] = {"target": None, "managed_server": None, "clock": None, "clock_detail": None}
        self.started = time.time()
        self.foreign_items = 0  # collected tests outside the suite (a whole-repository run)
        self.written: Path | None = None

    # -- collection and outcomes --------------------------------------------------------

    @pytest.hookimpl(tryfirst=True)  # before -k and -m deselect: deselected ids read "not run"
    def pytest_collection_modifyitems(
        self, session: pytest.Session, config: pytest.Config, items: list[pytest.Item]
    ) -> None:
        for item in items:
            if HERE not in Path(str(item.path)).resolve().parents:
                self.foreign_items += 1
                continue
            if item.get_closest_marker("conformance_meta"):
                continue
            ids = [str(i) for marker in item.iter_markers("req") for i in marker.args]
            self.ids_of[item.nodeid] = ids
            doc = (getattr(item, "obj", None).__doc__ or "").strip().splitlines()
            self.doc_of[item.nodeid] = doc[0] if doc else item.name

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.nodeid not in self.ids_of:
            return
        current = self.results.get(report.nodeid)
        if report.when == "setup":
            if report.skipped:
                self.results[report.nodeid] = {"outcome": "skipped", "why": _skip_reason(report)}
            elif report.failed:
                self.results[report.nodeid] = {"outcome": "failed", "why": "setup: " + _failure(report)}
        elif report.when == "call":
            if report.skipped:
                self.results[report.nodeid] = {"outcome": "skipped", "why": _skip_reason(report)}
            elif report.failed:
                self.results[report.nodeid] = {"outcome": "failed", "why": _failure(report)}
            else:
                self.results[report.nodeid] = {"outcome": "passed", "why": ""}
        elif report.when == "teardown" and report.failed and (current is None or current["outcome"] != "failed"):
            self.results[report.nodeid] = {"outcome": "failed", "why": "teardown: " + _failure(report)}

    # -- by requirement ------------------------------------------------------------------

    def requirements(self) -> list[dict[str, Any]]:
        titles, later = catalogue()
        tests_of: dict[str, list[str]] = {}
        for nodeid, ids in self.ids_of.items():
            for ident in ids:
                tests_of.setdefault(ident, []).append(nodeid)
                if "/" in ident:
                    tests_of.setdefault(parent(ident), []).append(nodeid)
        every = list(titles) + sorted(set(tests_of) - set(titles))
        rows = []
        for ident in every:
            row: dict[str, Any] = {"id": ident, "title": titles.get(ident, "(not in the requirement catalogue)")}
            nodeids = list(dict.fromkeys(tests_of.get(ident, [])))
            tests = [
                {
                    "test": nodeid,
                    "doc": self.doc_of.get(nodeid, ""),
                    **self.results.get(nodeid, {"outcome": "not run", "why": "deselected or not run"}),
                }
                for nodeid in nodeids
            ]
            if parent(ident).startswith(AGENT_REQUIREMENTS) or ident in AGENT_ONLY:
                row.update(status="not applicable", why=NOT_APPLICABLE)
            elif ident in CLIENT_ONLY:
                row.update(status="not applicable", why=NOT_A_SERVERS)
            elif ident in later:
                row.update(status="skipped", why=LATER)
            else:
                row.update(_combine(tests))
            row["tests"] = tests
            rows.append(row)
        return rows

    def other_checks(self) -> list[dict[str, Any]]:
        """Tests that carry no requirement id (conventions, the differential run)."""
        return [
            {
                "test": nodeid,
                "doc": self.doc_of.get(nodeid, ""),
                **self.results.get(nodeid, {"outcome": "not run", "why": "deselected or not run"}),
            }
            for nodeid, ids in self.ids_of.items()
            if not ids
        ]

    def document(self) -> dict[str, Any]:
        rows = self.requirements()
        counts: dict[str, int] = {}
        for row in rows:
            counts[row["status"]] = counts.get(row["status"], 0) + 1
        return {
            "suite": "amc conformance (specs/protocol.md Parts A and B)",
            **self.run,
            "started_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(self.started)),
            "duration_seconds": round(time.time() - self.started, 1),
            "summary": counts,
            "requirements": rows,
            "other_checks": self.other_checks(),
        }

    # -- output --------------------------------------------------------------------------

    def report_path(self) -> Path:
        given = option(self.config, "--conformance-report")
        if given:
            return Path(given)
        return Path(tempfile.gettempdir()) / "amc-conformance-report.json"

    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int | pytest.ExitCode) -> None:
        if not self.ids_of:
            return
        path = self.report_path()
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps(self.document(), indent=2) + "\n")
            self.written = path
        except OSError as error:
            self.run["report_error"] = str(error)

    def pytest_terminal_summary(
        self, terminalreporter: pytest.TerminalReporter, exitstatus: pytest.ExitCode, config: pytest.Config
    ) -> None:
        if not self.ids_of:
            return
        document = self.document()
        write = terminalreporter.write_line
        terminalreporter.section("amc conformance report")
        clock = document["clock"] or "not detected (no scenario ran)"
        where = "our own amc serve, started for this run" if document["managed_server"] else "given by --target-url"
        write(f"target: {document['target']} ({where})")
        write(f"clock:  {clock}" + (f" - {document['clock_detail']}" if document["clock_detail"] else ""))
        # A whole-repository run shows only the failures here; a conformance run shows all.
        rows = document["requirements"]
        shown = rows if self.foreign_items == 0 else [r for r in rows if r["status"] == "failed"]
        width = max((len(r["id"]) for r in shown), default=10)
        for row in shown:
            line = f"  {row['id']:<{width}}  {row['status'].upper()}"
            if row["status"] != "passed":
                line = f"{line:<{width + 20}}{row['why']}"
            write(line[:220])
        others = [c for c in document["other_checks"] if self.foreign_items == 0 or c["outcome"] == "failed"]
        if others:
            write("checks without a requirement id:")
            for check in others:
                why = f"  {check['why']}" if check["why"] else ""
                write(f"  {check['outcome'].upper():<8} {check['test'].split('::')[-1]}: {check['doc']}{why}"[:220])
        summary = ", ".join(f"{n} {status}" for status, n in sorted(document["summary"].items()))
        write(f"requirements: {summary}")
        if self.written is not None:
            write(f"JSON report: {self.written}")
        elif "report_error" in self.run:
            write(f"JSON report NOT written: {self.run['report_error']}")


def _combine(tests: list[dict[str, str]]) -> dict[str, str]:
    ran = [t for t in tests if t["outcome"] != "not run"]
    failed = [t for t in ran if t["outcome"] == "failed"]
    passed = [t for t in ran if t["outcome"] == "passed"]
    skipped = [t for t in ran if t["outcome"] == "skipped"]
    if not tests:
        return {"status": "skipped", "why": "no test of this suite checks it"}
    if not ran:
        return {"status": "skipped", "why": "not run in this session (deselected with -k/-m, or stopped early)"}
    if failed:
        names = ", ".join(t["test"].split("::")[-1] for t in failed)
        return {"status": "failed", "why": f"{names}: {failed[0]['why']}"}
    if not passed:
        return {"status": "skipped", "why": skipped[0]["why"]}
    why = f"{len(passed)} test(s) passed"
    if skipped:
        why += f"; {len(skipped)} skipped: {skipped[0]['why']}"
    if len(ran) < len(tests):
        why += f"; {len(tests) - len(ran)} not run"
    return {"status": "passed", "why": why}


def _skip_reason(report: pytest.TestReport) -> str:
    longrepr = report.longrepr
    if isinstance(longrepr, tuple) and len(longrepr) == 3:
        return str(longrepr[2]).removeprefix("Skipped: ")
    return str(longrepr)


def _failure(report: pytest.TestReport) -> str:
    crash = getattr(report.longrepr, "reprcrash", None)
    text = crash.message if crash is not None else str(report.longrepr)
    return " ".join(text.split())[:400]
