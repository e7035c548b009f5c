"""Optional: check every exchange of a conformance run against an OpenAPI document.

A pytest plugin. With ``--validate-openapi SPEC`` (env AMC_CONFORMANCE_OPENAPI) every request
the scenarios send and every response the server gives are validated with openapi-core
against SPEC (our own is specs/openapi.yaml), so a run proves that the document describes
the wire as the server speaks it, and that the server answers as the document says:

- every response: its status must be documented for the operation, its body must match the
  documented schema for its media type, and documented required headers must be there;
- a request the server accepted (2xx) or refused only by a rule of the operation (409) must
  be one the document allows (the scenarios' deliberately malformed requests are refused
  earlier, with 400, 404 and the like, and are not held against the document);
- a request that names no documented operation must get the problem document the spec
  gives such requests: 401 without a valid token (always, when it has no token at all),
  else 404 for an unknown path, or 405 for a method the path lacks, whose ``Allow`` lists
  exactly the path's documented methods (413 for an oversized body comes before all).

An extra test, ``openapi-check``, runs after every other test and fails listing each
mismatch (the same mismatch on many requests is listed once, with a count and one
example). The terminal summary lists every (method, path template, status) that was
validated, so what the run covered is visible.

An implementer runs it with the suite::

    pip install openapi-core
    amc conformance URL --tokens FILE -- -p amc.conformance.openapi_check --validate-openapi openapi.yaml

Nothing else in the suite needs openapi-core: it is imported only when the check is on.
"""

from __future__ import annotations

import functools
import json
import os
import threading
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx
import pytest

if TYPE_CHECKING:
    from collections.abc import Generator

    from _pytest._code.code import TerminalRepr, TracebackStyle
    from openapi_core import OpenAPI

OPTION = "--validate-openapi"
ENV = "AMC_CONFORMANCE_OPENAPI"
PLUGIN_NAME = "amc-openapi-check"
ITEM_NAME = "openapi-check"
UNKNOWN_PATH = "(a path the document does not list)"

# What a request that names no documented operation may get, by the component response
# of the document that describes it.
UNROUTED = {401: "Unauthorized", 404: "NotFound", 405: "MethodNotAllowed", 413: "PayloadTooLarge"}
HTTP_METHODS = ("get", "put", "post", "delete", "options", "head", "patch", "trace")


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("amc-conformance", "amc conformance suite")
    try:
        group.addoption(
            OPTION,
            action="store",
            default=None,
            metavar="SPEC",
            help=f"validate every request and response against this OpenAPI document [env {ENV}]",
        )
    except ValueError:  # already added
        pass


def pytest_configure(config: pytest.Config) -> None:
    spec = config.getoption(OPTION, default=None) or os.environ.get(ENV)
    if spec:
        try:
            import openapi_core  # noqa: F401
        except ImportError:
            raise pytest.UsageError(f"{OPTION} needs openapi-core: pip install openapi-core") from None
        if not Path(spec).is_file():
            raise pytest.UsageError(f"{OPTION}: no file {spec}")
        enable(config, Path(spec))


def enable(config: pytest.Config, spec: Path) -> OpenAPIReport:
    """Turn the check on for this run (once; a later call returns the same report)."""
    report = config.pluginmanager.get_plugin(PLUGIN_NAME)
    if report is None:
        report = OpenAPIReport(OpenAPICheck(spec))
        config.pluginmanager.register(report, PLUGIN_NAME)
    return report


# ---------------------------------------------------------------------------------------
# httpx exchanges as openapi-core sees them (its Request and Response protocols)


class _Request:
    def __init__(self, request: httpx.Request):
        from openapi_core.datatypes import RequestParameters
        from werkzeug.datastructures import Headers, ImmutableMultiDict

        url = request.url
        self.host_url = f"{url.scheme}://{url.netloc.decode('ascii')}"
        self.path = url.path
        self.full_url = self.host_url + self.path
        self.method = request.method.lower()
        self.body = request.content or None
        # A body without a Content-Type is bytes of unknown type (RFC 9110, 8.3), which
        # is how the artifact upload stores it.
        default = "application/octet-stream" if self.body else ""
        self.content_type = request.headers.get("content-type", default).lower()
        self.parameters = RequestParameters(
            query=ImmutableMultiDict(list(url.params.multi_items())),
            header=Headers(list(request.headers.multi_items())),
            cookie=ImmutableMultiDict(),
        )


class _Response:
    def __init__(self, response: httpx.Response):
        from werkzeug.datastructures import Headers

        self.status_code = response.status_code
        self.content_type = response.headers.get("content-type", "").lower()
        self.headers = Headers(list(response.headers.multi_items()))
        self.data = response.content


# ---------------------------------------------------------------------------------------
# The check


class OpenAPICheck:
    """Validates exchanges against one OpenAPI document; collects coverage and mismatches.

    `observe` is a `Connection` observer: it never raises, it records.
    """

    def __init__(self, spec_path: Path):
        from openapi_core.templating.paths.finders import APICallPathFinder

        self.spec_path = spec_path
        self.openapi = _load(spec_path.resolve())
        self.finder = APICallPathFinder(self.openapi.spec)
        self.validated: Counter[tuple[str, str, int]] = Counter()
        self.mismatches: dict[tuple[str, str, int, str], list[Any]] = {}  # key -> [count, example]
        self._lock = threading.Lock()

    # -- what a run saw -------------------------------------------------------------------

    def observe(self, request: httpx.Request, response: httpx.Response) -> None:
        try:
            with self._lock:
                self._check(_Request(request), _Response(response))
        except Exception as error:  # noqa: BLE001  (a bug of this check must not pass as a server's fault)
            self._mismatch(
                request.method,
                request.url.path,
                response.status_code,
                f"the check itself failed: {type(error).__name__}: {error}",
                request.url.path,
            )

    def _check(self, request: _Request, response: _Response) -> None:
        from openapi_core.templating.paths.exceptions import OperationNotFound, PathNotFound, ServerNotFound

        method, status = request.method.upper(), response.status_code
        try:
            template = self.finder.find(request.method, request.full_url).path_result.pattern
        except (PathNotFound, ServerNotFound):
            self._check_unrouted(request, response, UNKNOWN_PATH, allowed=None)
            return
        except OperationNotFound:
            template = self._template_of(request.path)
            self._check_unrouted(request, response, template, allowed=self._methods(template))
            return
        self.validated[(method, template, status)] += 1
        for error in self.openapi.iter_response_errors(request, response):
            self._mismatch(method, template, status, "response: " + _describe(error), request.path)
        if _form_accepted(status):
            for error in self.openapi.iter_request_errors(request):
                self._mismatch(
                    method,
                    template,
                    status,
                    "the server accepted a request the document does not allow: " + _describe(error),
                    request.path,
                )

    def _check_unrouted(self, request: _Request, response: _Response, template: str, allowed: set[str] | None) -> None:
        """A request that names no documented operation: only the answers the document gives it."""
        method, status = request.method.upper(), response.status_code
        self.validated[(method, template, status)] += 1
        has_token = "authorization" in request.parameters.header
        wanted = {401, 413}  # authentication comes before routing: without a token, nothing else
        if has_token:
            wanted.add(404 if allowed is None else 405)
        if status not in wanted:
            who = "a request no operation documents" + ("" if has_token else " and without a token")
            self._mismatch(
                method, template, status, f"{who} must get {' or '.join(map(str, sorted(wanted)))}", request.path
            )
            return
        component = UNROUTED[status]
        documented = (self.openapi.spec / "components" / "responses" / component).read_value()
        media, schema = next(iter(documented["content"].items()))
        if response.content_type.split(";")[0].strip() != media:
            self._mismatch(
                method, template, status, f"content-type {response.content_type!r}, documented {media}", request.path
            )
            return
        errors = list(dict.fromkeys(self._schema_errors(schema, response.data)))
        if errors:
            self._mismatch(method, template, status, "response: " + "; ".join(errors[:5]), request.path)
        if status == 405 and allowed is not None:  # a 405 was wanted only where the path has methods
            given = {m.strip().lower() for m in response.headers.get("allow", "").split(",") if m.strip()}
            if given - {"head"} != allowed:
                self._mismatch(
                    method,
                    template,
                    status,
                    f"Allow: {response.headers.get('allow')!r}, the path's documented methods are "
                    f"{', '.join(sorted(m.upper() for m in allowed))}",
                    request.path,
                )

    def _schema_errors(self, media: dict[str, Any], data: bytes) -> list[str]:
        from openapi_schema_validator import OAS31Validator

        try:
            document = json.loads(data)
        except ValueError:
            return [f"not JSON: {data[:120]!r}"]
        schema = dict(media["schema"])
        schema["components"] = self.openapi.spec.read_value()["components"]  # so that #/components refs resolve
        return [_describe_schema_error(e) for e in OAS31Validator(schema).iter_errors(document)]

    # -- the document ---------------------------------------------------------------------

    def _paths(self) -> dict[str, Any]:
        paths: dict[str, Any] = (self.openapi.spec / "paths").read_value()
        return paths

    def _template_of(self, path: str) -> str:
        from openapi_core.templating.paths.parsers import PathParser

        for template in self._paths():
            if PathParser(template).parse(path):
                return template
        return path

    def _methods(self, template: str) -> set[str]:
        return {m for m in self._paths().get(template, {}) if m in HTTP_METHODS}

    # -- findings -------------------------------------------------------------------------

    def _mismatch(self, method: str, template: str, status: int, what: str, example: str) -> None:
        entry = self.mismatches.setdefault((method.upper(), template, status, what), [0, example])
        entry[0] += 1

    def coverage_lines(self) -> list[str]:
        return [
            f"{method:<6} {template}  {status}  x{count}"
            for (method, template, status), count in sorted(self.validated.items())
        ]

    def mismatch_lines(self) -> list[str]:
        """One line per distinct mismatch, with how often it was seen and one example path."""
        lines = []
        for (method, template, status, what), (count, example) in sorted(self.mismatches.items()):
            seen = f" (x{count}, e.g. {example})" if count > 1 or example != template else ""
            lines.append(f"{method} {template} -> {status}: {what}{seen}")
        return lines


@functools.cache
def _load(spec_path: Path) -> OpenAPI:
    """The document, checked to be valid OpenAPI (about a second; once per run)."""
    from openapi_core import Config, OpenAPI

    # openapi-core reads only application/json as JSON; a problem document is JSON too.
    config = Config(extra_media_type_deserializers={"application/problem+json": json.loads})
    return OpenAPI.from_file_path(str(spec_path), config=config)


def _form_accepted(status: int) -> bool:
    """The server parsed and accepted the request's form (a success, or a refusal by a rule of
    the operation, which comes after the body is checked): the document must allow it. The
    scenarios' deliberately malformed requests are refused earlier (400, 404...)."""
    return 200 <= status < 300 or status == 409


def _describe(error: Exception) -> str:
    """An openapi-core error with the schema errors that caused it, by JSON path."""
    text = str(error) if not getattr(error, "__cause__", None) else f"{error}: {error.__cause__}"
    cause = error.__cause__ or error
    schema_errors = list(getattr(cause, "schema_errors", None) or [])
    if schema_errors:
        shown = "; ".join(list(dict.fromkeys(_describe_schema_error(e) for e in schema_errors))[:5])
        return f"{type(cause).__name__}: {shown}"
    return " ".join(text.split())[:400]


def _describe_schema_error(error: Any) -> str:
    """Where and what, the same for every instance of one mismatch (so that it is listed once):
    array indexes read `*`, and the offending value is named by its type (but kept, when short,
    where it is the point: a value outside an enum, a const or a pattern)."""
    where = "/".join("*" if isinstance(p, int) else str(p) for p in getattr(error, "absolute_path", [])) or "(top)"
    message = str(getattr(error, "message", error))
    value = repr(getattr(error, "instance", None))
    keep = len(value) <= 40 and getattr(error, "validator", None) in ("enum", "const", "pattern")
    if message.startswith(value) and not keep:
        message = f"<{type(error.instance).__name__}>{message[len(value) :]}"
    return f"at {where}: {' '.join(message.split())[:300]}"


# ---------------------------------------------------------------------------------------
# The pytest side: attach to the suite's connection, report, and fail when anything differs


class OpenAPIReport:
    def __init__(self, check: OpenAPICheck):
        self.check = check
        self.attached = False

    @pytest.hookimpl(wrapper=True)
    def pytest_fixture_setup(
        self, fixturedef: pytest.FixtureDef[Any], request: pytest.FixtureRequest
    ) -> Generator[None, object, object]:
        value = yield
        if fixturedef.argname == "connection" and hasattr(value, "observe"):
            value.observe(self.check.observe)
            self.attached = True
        return value

    @pytest.hookimpl(trylast=True)  # after -k/-m deselection: only when scenarios will run
    def pytest_collection_modifyitems(
        self, session: pytest.Session, config: pytest.Config, items: list[pytest.Item]
    ) -> None:
        if any(_talks_to_the_target(item) for item in items):
            items.append(OpenAPICheckItem.from_parent(session, name=ITEM_NAME, check=self.check, report=self))

    def pytest_terminal_summary(
        self, terminalreporter: pytest.TerminalReporter, exitstatus: pytest.ExitCode, config: pytest.Config
    ) -> None:
        if not self.check.validated:
            return
        write = terminalreporter.write_line
        terminalreporter.section(f"OpenAPI check against {self.check.spec_path.name}")
        write("validated (method, path, status):")
        for line in self.check.coverage_lines():
            write(f"  {line}")
        mismatches = self.check.mismatch_lines()
        write(f"mismatches: {len(mismatches)}")
        for line in mismatches:
            write(f"  {line}"[:400])


SCENARIOS = Path(__file__).resolve().parent / "scenarios"


def _talks_to_the_target(item: pytest.Item) -> bool:
    """A scenario, or any test that uses the suite's connection to the server."""
    return "connection" in getattr(item, "fixturenames", ()) or SCENARIOS in Path(str(item.path)).resolve().parents


class OpenAPICheckItem(pytest.Item):
    """Runs last: fails if any exchange of the run differed from the document."""

    def __init__(self, *, check: OpenAPICheck, report: OpenAPIReport, **kwargs: Any):
        super().__init__(**kwargs)
        self.check = check
        self.report = report

    def runtest(self) -> None:
        if not self.report.attached:
            unseen = (
                "the scenarios ran, but no `connection` fixture reached this check, so nothing was "
                "validated (was the suite's connection fixture renamed?)"
            )
            raise OpenAPIMismatch([unseen])
        mismatches = self.check.mismatch_lines()
        if mismatches:
            raise OpenAPIMismatch(mismatches)

    def repr_failure(
        self, excinfo: pytest.ExceptionInfo[BaseException], style: TracebackStyle | None = None
    ) -> str | TerminalRepr:
        if isinstance(excinfo.value, OpenAPIMismatch):
            return "\n".join([f"the exchanges of this run against {self.check.spec_path}:", *excinfo.value.lines])
        return super().repr_failure(excinfo, style)

    def reportinfo(self) -> tuple[Path, None, str]:
        return self.check.spec_path, None, f"{ITEM_NAME}: every exchange matched {self.check.spec_path.name}"


class OpenAPIMismatch(AssertionError):
    def __init__(self, lines: list[str]):
        super().__init__("\n".join(lines))
        self.lines = lines
