"""specs/openapi.yaml: a valid OpenAPI 3.1 document that documents every route, and only those.

(Every response the HTTP tests see is validated against it by `client.Caller`.)
"""

from __future__ import annotations

import re

from openapi_spec_validator import validate

from amc.adapters.http.app import create_app
from amc.adapters.http.auth import TokenTable
from amc.adapters.http.routes.console import PREFIX
from amc.adapters.http.settings import Settings
from amc.service import MemoryService
from tests.adapters.http.contract import CONTRACT, spec


def routes() -> set[tuple[str, str]]:
    """The API's routes: every route but the web console's static files (`/` and /ui), which
    are a page for people, not part of the API (tests/adapters/http/test_console.py)."""
    app = create_app(MemoryService(), Settings(manual_clock=True), tokens=TokenTable())
    found = set()
    for route in app.routes:
        if route.path == "/" or route.path == PREFIX or route.path.startswith(PREFIX + "/"):
            continue
        path = re.sub(r"\{(\w+):\w+\}", r"{\1}", route.path)
        found |= {(method.lower(), path) for method in route.methods if method != "HEAD"}
    return found


def documented() -> set[tuple[str, str]]:
    methods = {"get", "put", "post", "delete", "patch"}
    return {(method, path) for path, item in spec()["paths"].items() for method in item if method in methods}


def test_the_document_is_valid_openapi():
    validate(spec())


def test_every_route_is_documented_and_every_documented_route_exists():
    assert routes() == documented()


def test_every_operation_documents_its_errors():
    for path, item in spec()["paths"].items():
        for method, operation in item.items():
            if not isinstance(operation, dict) or "responses" not in operation:
                continue
            statuses = set(operation["responses"])
            if operation.get("security") == []:
                continue  # health and metrics: open, no body
            assert {"401", "413"} <= statuses, (method, path)
            if "requestBody" in operation:
                assert "400" in statuses, (method, path)


def test_the_problem_codes_are_the_protocols():
    from amc.adapters.http.problems import CODES
    from amc.core.errors import Code

    documented_codes = set(spec()["components"]["schemas"]["Problem"]["properties"]["code"]["enum"])
    assert documented_codes == set(CODES)
    assert {code.name for code in Code} <= documented_codes


def test_the_contract_checker_rejects_what_the_spec_does_not_say():
    import pytest

    with pytest.raises(AssertionError):
        CONTRACT.check("get", "/v1/tasks/t_1", 200, "application/json", b'{"id": "t_1"}')
    with pytest.raises(AssertionError):
        CONTRACT.check("get", "/v1/health", 200, "application/json", b'{"status": "ok", "extra": 1}')
    with pytest.raises(AssertionError):
        CONTRACT.check("post", "/v1/hosts/h1/claim", 418, "application/json", b"{}")


def test_the_step_schemas_name_every_action_of_the_table_and_take_its_good_forms():
    """specs/openapi.yaml's `Step` union and amc.core.actions agree: the same action names, and
    every good form of the v1.2 actions validates against the document (UI/s13)."""
    import jsonschema

    from amc.core import actions
    from tests.model.test_actions import GOOD
    from tests.model.test_app_actions import GOOD as APP_GOOD

    schemas = spec()["components"]["schemas"]
    named: set[str] = set()
    for ref in schemas["Step"]["oneOf"]:
        action = schemas[ref["$ref"].rsplit("/", 1)[1]]["properties"]["action"]
        named |= {action["const"]} if "const" in action else set(action["enum"])
    assert named == set(actions.ACTIONS)

    step = {"$ref": "#/components/schemas/Step", "components": spec()["components"]}
    validator = jsonschema.Draft202012Validator(step)
    for action, args in GOOD + APP_GOOD:
        validator.validate({"id": "s", "action": action, "args": args})
    for action, args in [("tap", {"x": 1, "y": 2, "target": {"text": "a"}}), ("wait_for", {"target": {"index": 1}})]:
        assert not validator.is_valid({"id": "s", "action": action, "args": args})
