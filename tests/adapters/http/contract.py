"""specs/openapi.yaml as a checker: every response a test sees must validate against it.

`Contract.check` finds the operation for a method and a concrete path, requires the status
to be documented for it, and validates the body against the documented schema (JSON
Schema 2020-12, which OpenAPI 3.1 uses). A successful request's JSON body is validated
against the documented request schema too, so the document cannot fall behind the server
in either direction. Unknown paths and methods must answer problem documents.
"""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path

import jsonschema
import orjson
import yaml

SPEC_PATH = Path(__file__).resolve().parents[3] / "specs" / "openapi.yaml"


@cache
def spec() -> dict:
    return yaml.safe_load(SPEC_PATH.read_text())


def _pointer(*parts: str) -> str:
    return "#/" + "/".join(p.replace("~", "~0").replace("/", "~1") for p in parts)


class Contract:
    def __init__(self) -> None:
        self.spec = spec()
        self.paths = [
            (re.compile("^" + re.sub(r"\{[^/]+\}", "[^/]+", template) + "$"), template)
            for template in self.spec["paths"]
        ]
        self.seen: set[tuple[str, str, int]] = set()

    def template(self, path: str) -> str | None:
        for pattern, template in self.paths:
            if pattern.match(path):
                return template
        return None

    def _resolve(self, node: dict) -> dict:
        while "$ref" in node:
            node = self._at(node["$ref"])
        return node

    def _at(self, ref: str) -> dict:
        node = self.spec
        for part in ref.removeprefix("#/").split("/"):
            node = node[part.replace("~1", "/").replace("~0", "~")]
        return node

    def check(
        self, method: str, path: str, status: int, content_type: str, body: bytes, request_body: bytes | None = None
    ) -> None:
        method = method.lower()
        template = self.template(path)
        problem = content_type.startswith("application/problem+json")
        if template is None or method not in self.spec["paths"][template]:
            # Size and authentication come before routing: 413 and 401 are possible here too.
            assert status in (401, 404, 405, 413) and problem, (
                f"{method.upper()} {path} is not documented, answered {status}"
            )
            self._validate_problem(body, status)
            return
        operation = self.spec["paths"][template][method]
        responses = operation["responses"]
        assert str(status) in responses, f"{method.upper()} {template}: status {status} is not documented"
        self.seen.add((method, template, status))
        response = self._resolve(responses[str(status)])
        content = response.get("content")
        if content is None:
            assert not body, f"{method.upper()} {template} {status}: documented without a body, got {body[:80]!r}"
            return
        media = content_type.split(";")[0].strip()
        if media not in content and "*/*" in content:  # any media type: an artifact's bytes
            media = "*/*"
        assert media in content, f"{method.upper()} {template} {status}: {media} is not documented"
        schema = content[media].get("schema", {})
        if media.endswith("json"):
            location = _pointer("paths", template, method, "responses", str(status))
            if "$ref" in responses[str(status)]:
                location = responses[str(status)]["$ref"]
            validator = _validator(self, location + _pointer("content", media, "schema")[1:])
            errors = sorted(validator.iter_errors(orjson.loads(body)), key=lambda e: e.path)
            assert not errors, f"{method.upper()} {template} {status}: " + "; ".join(
                f"{list(e.absolute_path)}: {e.message}" for e in errors[:5]
            )
            if problem:
                assert orjson.loads(body)["status"] == status
        elif schema.get("type") == "string" and schema.get("format") != "binary":
            body.decode("utf-8")
        json_request = "application/json" in operation.get("requestBody", {}).get("content", {})
        if request_body and 200 <= status < 300 and json_request:
            validator = _validator(
                self, _pointer("paths", template, method, "requestBody", "content", "application/json", "schema")
            )
            errors = list(validator.iter_errors(orjson.loads(request_body)))
            assert not errors, (
                f"{method.upper()} {template}: an accepted request does not match the spec: "
                + "; ".join(e.message for e in errors[:5])
            )

    def _validate_problem(self, body: bytes, status: int) -> None:
        data = orjson.loads(body)
        errors = list(_validator(self, _pointer("components", "schemas", "Problem")).iter_errors(data))
        assert not errors, errors[0].message
        assert data["status"] == status


_cache: dict[str, jsonschema.Draft202012Validator] = {}


def _inline(contract: Contract, node):
    """`node` with every local $ref replaced by what it points to (the spec has no cycles).

    Validating through `$ref` lookups costs milliseconds per response; an inlined schema
    validates several times faster, which keeps the suite quick.
    """
    if isinstance(node, dict):
        if "$ref" in node:
            return _inline(contract, contract._at(node["$ref"]))
        return {key: _inline(contract, value) for key, value in node.items()}
    if isinstance(node, list):
        return [_inline(contract, item) for item in node]
    return node


def _validator(contract: Contract, location: str) -> jsonschema.Draft202012Validator:
    validator = _cache.get(location)
    if validator is None:
        schema = _inline(contract, {"$ref": location})
        jsonschema.Draft202012Validator.check_schema(schema)
        validator = _cache[location] = jsonschema.Draft202012Validator(schema)
    return validator


CONTRACT = Contract()
