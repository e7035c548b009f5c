"""Fuzzing `amc serve` from its contract: schemathesis generates requests from specs/openapi.yaml.

One `FuzzRun` drives one operation of the document against a real `amc serve` process (the
LMDB store, the manual clock) that was seeded with a little of everything: hosts, tasks of
two tenants in every status, leases, messages. Each generated request

- carries a credential drawn from `CREDENTIALS`: a valid token of every role, tokens that
  are almost right, none at all;
- names, half of the time, a task, attempt, message, host or lease that exists, so the
  fuzzer reaches the rules behind the 404s;
- is checked with schemathesis' response checks (no 5xx; status, content type, headers and
  body as the document says; a request the document calls invalid is refused);
- and, when it is refused (4xx), must have changed nothing: the full state read through the
  public API with an admin token (every task, its history and messages, every host) is the
  same before and after.

Nothing stops at the first finding: `Counts` adds them up, so `make fuzz` can print the figures.
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
import warnings
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import attrs
import orjson
import requests
import schemathesis
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from schemathesis import GenerationMode
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    negative_data_rejection,
    response_headers_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from tests.support.plans import PLAN
from tests.support.served import serve

SPEC = Path(__file__).resolve().parents[3] / "specs" / "openapi.yaml"
SCHEMA = schemathesis.openapi.from_path(SPEC)
OPERATIONS = {result.ok().label: result.ok() for result in SCHEMA.get_all_operations()}

# The checks of the document: no 5xx, and every response as the document describes it;
# a request the document calls invalid (schemathesis' negative mode) must be refused.
CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_headers_conformance,
    response_schema_conformance,
    negative_data_rejection,
]

# Operations whose 200 is a body that does not end (specs/protocol.md Part E), and how long
# one request reads it.
STREAMS = {"GET /v1/events"}
STREAM_SECONDS = 0.5

ADMIN = "fuzz-admin-token-0000000000000000"
TOKENS = [
    {"token": ADMIN, "role": "admin"},
    {"token": "fuzz-client-acme-000000000000000", "role": "client", "tenant": "acme"},
    {"token": "fuzz-client-beta-000000000000000", "role": "client", "tenant": "beta"},
    {"token": "fuzz-host-h1-0000000000000000000", "role": "host", "host_id": "h1"},
    {"token": "fuzz-host-h2-0000000000000000000", "role": "host", "host_id": "h2"},
]
VALID = {entry.get("tenant") or entry.get("host_id") or "admin": entry["token"] for entry in TOKENS}
# What an Authorization header may say: each valid token, and the wrong ones (None: no header).
CREDENTIALS: list[str | None] = [
    *(f"Bearer {token}" for token in VALID.values()),
    None,
    "Bearer fuzz-nobody-has-this-token-000000",
    f"Bearer {ADMIN[:-1]}1",  # the admin token but for its last character
    f"Bearer {ADMIN}x",
    f"Basic {ADMIN}",
    "Bearer ",
    ADMIN,
]


@attrs.define
class Counts:
    """What a run found, summed over operations."""

    requests: int = 0
    refused: int = 0
    server_errors: int = 0
    mismatches: int = 0
    state_changes: int = 0
    statuses: Counter = attrs.field(factory=Counter)
    findings: list[str] = attrs.field(factory=list)

    def add(self, other: Counts) -> None:
        self.requests += other.requests
        self.refused += other.refused
        self.server_errors += other.server_errors
        self.mismatches += other.mismatches
        self.state_changes += other.state_changes
        self.statuses.update(other.statuses)
        self.findings += other.findings

    @property
    def failures(self) -> int:
        return self.server_errors + self.mismatches + self.state_changes

    def summary(self) -> str:
        statuses = ", ".join(f"{status}: {n}" for status, n in sorted(self.statuses.items()))
        return (
            f"requests fuzzed: {self.requests} ({statuses})\n"
            f"5xx found: {self.server_errors}\n"
            f"responses not as the document says: {self.mismatches}\n"
            f"refused requests (4xx): {self.refused}, of which changed the state: {self.state_changes}"
        )


class Served:
    """An `amc serve` process on a free port, with the manual clock and the fuzz tokens."""

    def __init__(self, data: Path):
        tokens = data.parent / f"{data.name}-tokens.json"
        tokens.write_text(json.dumps(TOKENS))
        tokens.chmod(0o600)
        self.stderr: list[str] = []  # the server's output lines, stdout and stderr together
        self.server = serve(
            data, "--clock", "manual", sink=lambda name, line: self.stderr.append(line + "\n"), tokens=tokens
        )
        self.url = self.server.url
        self.http = requests.Session()

    def call(self, method: str, path: str, body: Any = None, token: str = ADMIN, expect: int = 200) -> Any:
        response = self.http.request(
            method, self.url + path, json=body, headers={"Authorization": f"Bearer {token}"}, timeout=30
        )
        assert response.status_code == expect, f"{method} {path}: {response.status_code} {response.text}"
        return response.json() if response.content else None

    def stop(self) -> None:
        self.http.close()
        self.server.stop(15)


@attrs.define
class Known:
    """The resources of the seeded state, for the fuzzer to name."""

    tasks: list[str] = attrs.field(factory=list)
    messages: list[str] = attrs.field(factory=list)
    leases: list[str] = attrs.field(factory=list)
    hosts: list[str] = attrs.field(factory=lambda: ["h1", "h2", "h3"])
    attempts: list[int] = attrs.field(factory=lambda: [1, 2])
    artifacts: list[str] = attrs.field(factory=list)
    steps: list[str] = attrs.field(factory=lambda: [step["id"] for step in PLAN["steps"]])


def seed(served: Served) -> Known:
    """A little of everything: queued, held, assigned, dispatched, done, failed and cancelled
    tasks of two tenants, leases of two hosts, messages in several states, and an artifact."""
    known = Known()
    acme, beta, h1, h2 = VALID["acme"], VALID["beta"], VALID["h1"], VALID["h2"]

    def submit(token: str, **fields: Any) -> str:
        task_id = served.call("POST", "/v1/tasks", {"plan": PLAN, **fields}, token, 201)["id"]
        known.tasks.append(task_id)
        return task_id

    def message(task_id: str, intent: str, **fields: Any) -> str:
        message_id = served.call("POST", f"/v1/tasks/{task_id}/messages", {"intent": intent, **fields}, acme, 201)
        known.messages.append(message_id["id"])
        return message_id["id"]

    def claim(host: str, token: str) -> tuple[str, int, str]:
        assignment = served.call("POST", f"/v1/hosts/{host}/claim", {}, token)
        known.leases.append(assignment["lease_id"])
        return assignment["task_id"], assignment["attempt"], assignment["lease_id"]

    def lease(task_id: str, attempt: int, lease_id: str, verb: str, token: str = h1, **extra: Any) -> Any:
        return served.call(
            "POST", f"/v1/tasks/{task_id}/attempts/{attempt}/{verb}", {"lease_id": lease_id, **extra}, token
        )

    serials = [{"serial": f"d{i}", "attributes": {}} for i in range(1, 5)]
    served.call("PUT", "/v1/hosts/h1", {"devices": serials}, h1)
    served.call("PUT", "/v1/hosts/h2", {"devices": [{"serial": "d9", "attributes": {}}]}, h2)
    # Claimed in submission order: done, failed, dispatched (with messages), assigned.
    done, failed, running, _assigned = (submit(acme, priority=10) for _ in range(4))
    for task_id in (done, failed):
        _, attempt, lease_id = claim("h1", h1)
        lease(task_id, attempt, lease_id, "start")
        lease(task_id, attempt, lease_id, "result", status="done" if task_id == done else "failed")
    _, attempt, lease_id = claim("h1", h1)
    lease(running, attempt, lease_id, "start")
    steer = message(running, "steer", text="go left")
    message(running, "pause")
    lease(running, attempt, lease_id, "renew")  # delivers both
    served.call(
        "POST",
        f"/v1/tasks/{running}/attempts/{attempt}/messages/{steer}",
        {"lease_id": lease_id, "state": "admitted", "boundary": {"before_step": None}},
        h1,
    )
    uploaded = served.http.put(
        f"{served.url}/v1/tasks/{running}/attempts/{attempt}/artifacts/shot.png",
        params={"step": known.steps[0]},
        data=b"\x89PNG evidence",
        headers={"Authorization": f"Bearer {h1}", "Amc-Lease-Id": lease_id, "Content-Type": "image/png"},
        timeout=30,
    )
    assert uploaded.status_code == 201, uploaded.text
    known.artifacts.append(uploaded.json()["id"])
    claim("h1", h1)  # `assigned`
    message(done, "follow_up", text="and then")
    served.call("POST", f"/v1/tasks/{submit(acme)}/cancel", {}, acme)
    held = submit(acme)
    message(held, "pause")
    submit(acme)  # queued
    submit(beta, labels={"team": "b"})
    submit(VALID["admin"], tenant="gamma", idempotency_key="k1")
    claim("h2", h2)  # the oldest queued task, on another host
    return known


class StateReader:
    """The whole state, read through the public API with the admin token, as one digest.

    The reads of one snapshot go out together (a pool of connections): on a busy machine a
    request's latency is mostly waiting for the server's turn on a core, which the reads of
    one batch share.
    """

    def __init__(self, served: Served):
        self.served = served
        self.pool = ThreadPoolExecutor(8, thread_name_prefix="fuzz-state")
        self.local = threading.local()

    def _get(self, path: str) -> Any:
        session = getattr(self.local, "session", None)
        if session is None:
            session = self.local.session = requests.Session()
        response = session.get(self.served.url + path, headers={"Authorization": f"Bearer {ADMIN}"}, timeout=30)
        assert response.status_code == 200, f"GET {path}: {response.status_code} {response.text}"
        return response.json()

    def snapshot(self) -> dict[str, Any]:
        hosts = self.pool.submit(self._get, "/v1/hosts")
        tasks: list[Any] = []
        cursor: str | None = None
        while True:
            page = self._get("/v1/tasks?limit=1000" + (f"&after={cursor}" if cursor else ""))
            tasks += page["tasks"]
            cursor = page["next"]
            if cursor is None:
                break
        paths = [f"/v1/tasks/{task['id']}/{part}" for task in tasks for part in ("history", "messages")]
        return {
            "tasks": [_without_liveness(task, "waiting") for task in tasks],
            "hosts": [_host_as_recorded(host) for host in hosts.result()["hosts"]],
            "each": list(self.pool.map(self._get, paths)),
        }

    def digest(self) -> str:
        return hashlib.sha256(orjson.dumps(self.snapshot(), option=orjson.OPT_SORT_KEYS)).hexdigest()

    def close(self) -> None:
        self.pool.shutdown()


def cases_per_operation(default: int) -> int:
    """`AMC_FUZZ_CASES` overrides the bounded run's size (`make fuzz` sets it)."""
    return int(os.environ.get("AMC_FUZZ_CASES", default))


def _strategy(label: str) -> st.SearchStrategy:
    operation = OPERATIONS[label]
    strategies = [operation.as_strategy(generation_mode=GenerationMode.POSITIVE)]
    try:
        negative = operation.as_strategy(generation_mode=GenerationMode.NEGATIVE)
        with warnings.catch_warnings():  # .example() is meant for exploring; here it asks "can it?"
            warnings.simplefilter("ignore")
            negative.example()  # an operation with nothing to get wrong has no negative cases
        strategies.append(negative)
    except Exception:  # noqa: BLE001 (schemathesis raises several kinds for "cannot")
        pass
    return st.one_of(strategies)


class RefusalWatch:
    """Holds refused requests to the state they found: the digest before a run of refusals must
    be the digest after it.

    A request that must be refused whatever it says (no valid token, on an operation that needs
    one) is checked with the next digest taken, so a run of them costs one read of the state;
    any other request is checked on its own.
    """

    def __init__(self, reader: StateReader, counts: Counts):
        self.reader = reader
        self.counts = counts
        self.before: str | None = None  # the state's digest, while only refusals happened since
        self.held: list[str] = []  # refused requests not yet checked

    def ready(self, *, hold: bool) -> None:
        """Before each request; `hold`: it must be refused, so it may wait to be checked."""
        if not hold:
            self.settle()
        if self.before is None:
            self.before = self.reader.digest()

    def refused(self, request: str, *, hold: bool) -> None:
        self.held.append(request)
        if not hold:
            self.settle()

    def accepted(self) -> None:
        self.settle()
        self.before = None  # an accepted request may change anything

    def settle(self) -> None:
        if not self.held:
            return
        after = self.reader.digest()
        if after != self.before:
            self.counts.state_changes += 1
            self.counts.findings.append("refused, yet the state changed: " + " / ".join(self.held))
        self.before = after
        self.held = []


def fuzz(label: str, served: Served, known: Known, cases: int) -> Counts:
    """Run `cases` generated requests of one operation; what they found."""
    counts = Counts()
    reader = StateReader(served)
    watch = RefusalWatch(reader, counts)
    session = requests.Session()
    secured = OPERATIONS[label].definition.raw.get("security") != []
    good = {f"Bearer {token}" for token in VALID.values()}

    @settings(
        max_examples=cases,
        deadline=None,
        database=None,
        phases=[Phase.explicit, Phase.generate],
        suppress_health_check=list(HealthCheck),
    )
    @given(case=_strategy(label), data=st.data())
    def run(case: Any, data: st.DataObject) -> None:
        _aim(case, known, data)
        credential = data.draw(st.sampled_from(CREDENTIALS), label="Authorization")
        case.headers = {k: v for k, v in (case.headers or {}).items() if k.lower() != "authorization"}
        if credential is not None:
            case.headers["Authorization"] = credential
        unauthenticated = secured and credential not in good
        watch.ready(hold=unauthenticated)
        # schemathesis reads an event stream (whose body never ends) until the timeout, in total.
        timeout = STREAM_SECONDS if label in STREAMS else 30
        response = case.call(base_url=served.url, session=session, timeout=timeout)
        counts.requests += 1
        counts.statuses[response.status_code] += 1
        try:
            case.validate_response(response, checks=CHECKS, transport_kwargs={"base_url": served.url})
            if unauthenticated and response.status_code != 401:
                raise AssertionError(f"without a valid token, answered {response.status_code}")
        except Exception as failure:  # noqa: BLE001 (a FailureGroup, or a check's own error)
            if response.status_code >= 500:
                counts.server_errors += 1
            else:
                counts.mismatches += 1
            counts.findings.append(f"{label}: {failure}"[:3000])
        if 400 <= response.status_code < 500:
            counts.refused += 1
            watch.refused(case.as_curl_command(), hold=unauthenticated)
        else:
            watch.accepted()

    try:
        run()
        watch.settle()
    finally:
        session.close()
        reader.close()
    return counts


def _aim(case: Any, known: Known, data: st.DataObject) -> None:
    """Half of the time, name resources that exist; keep long polls short."""
    choices = {
        "task_id": known.tasks,
        "message_id": known.messages,
        "host_id": known.hosts,
        "attempt": known.attempts,
        "artifact_id": known.artifacts,
    }
    for name, values in choices.items():
        if name in (case.path_parameters or {}) and data.draw(st.booleans(), label=f"real {name}"):
            case.path_parameters[name] = data.draw(st.sampled_from(values), label=name)
    headers = case.headers or {}
    if "Amc-Lease-Id" in headers and data.draw(st.booleans(), label="real lease header"):
        headers["Amc-Lease-Id"] = data.draw(st.sampled_from(known.leases), label="Amc-Lease-Id")
    if "step" in (case.query or {}) and data.draw(st.booleans(), label="real step"):
        case.query["step"] = data.draw(st.sampled_from(known.steps), label="step")
    body = case.body
    if isinstance(body, dict):
        if "lease_id" in body and data.draw(st.booleans(), label="real lease"):
            body["lease_id"] = data.draw(st.sampled_from(known.leases), label="lease_id")
        wait = body.get("wait_seconds")
        if isinstance(wait, int | float) and not isinstance(wait, bool) and 0 < wait <= 30:
            body["wait_seconds"] = 0  # a valid long poll would only wait out its time


# Liveness is not state: any request by a host token moves `last_seen_at`, refused or not, and
# `online` (a host's, its devices', and so a queued task's `waiting`) follows from it and the
# clock (specs/protocol.md, Host liveness). A refused request must leave the rest as it was.
def _without_liveness(document: dict[str, Any], *members: str) -> dict[str, Any]:
    return {key: value for key, value in document.items() if key not in members}


def _host_as_recorded(host: dict[str, Any]) -> dict[str, Any]:
    recorded = _without_liveness(host, "last_seen_at", "online")
    recorded["devices"] = [_without_liveness(device, "online") for device in host.get("devices", [])]
    return recorded
