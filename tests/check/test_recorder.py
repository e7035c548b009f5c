"""The recording transport: what it writes, what it leaves alone, and a request with no answer."""

from __future__ import annotations

import asyncio

import httpx
import orjson
import pytest

from amc.check.operations import read
from amc.check.recorder import HistoryFile, RecordingTransport, SyncRecordingTransport, kind_of


def answer(request: httpx.Request) -> httpx.Response:
    if request.url.path.endswith("/renew"):
        raise httpx.ConnectError("refused", request=request)
    body = {"task_id": "t1", "attempt": 1, "lease_id": "l1", "lease_seconds": 10, "device": "d1", "plan": {"x": 1}}
    return httpx.Response(200, json=body)


def lines(history: HistoryFile) -> list[dict]:
    return [orjson.loads(raw) for raw in history.path.read_bytes().splitlines()]


def test_kinds_are_read_from_the_method_and_path():
    assert kind_of("POST", "/v1/hosts/h1/claim") == ("claim", {"host": "h1"})
    assert kind_of("POST", "/v1/tasks/t1/attempts/2/renew") == ("renew", {"task": "t1", "attempt": "2"})
    assert kind_of("GET", "/v1/tasks/t1") == ("read", {"task": "t1"})
    assert kind_of("PUT", "/v1/tasks/t1/attempts/1/artifacts/a.png") is None
    assert kind_of("GET", "/v1/tasks") is None


def test_a_recorded_answer_keeps_its_times_and_only_the_fields_the_checker_reads(tmp_path):
    history = HistoryFile(tmp_path / "h.jsonl")
    transport = SyncRecordingTransport(httpx.MockTransport(answer), history, "h1")
    with httpx.Client(base_url="http://amc.invalid", transport=transport) as http:
        got = http.post("/v1/hosts/h1/claim", json={"devices": ["d1"], "wait_seconds": 5})
        http.get("/v1/health")  # not recorded
    assert got.json()["plan"] == {"x": 1}  # the caller still reads the whole answer
    header, claim = lines(history)
    assert header["kind"] == "header" and header["boot"]
    assert claim["kind"] == "claim" and claim["host"] == "h1" and claim["client"] == "h1"
    assert claim["request"] == {"devices": ["d1"]}
    assert claim["answer"] == {"task_id": "t1", "attempt": 1, "lease_id": "l1", "lease_seconds": 10, "device": "d1"}
    assert claim["t0"] <= claim["t1"] and claim["w0"] <= claim["w1"] and claim["status"] == 200


def test_a_request_without_an_answer_is_recorded_as_unknown(tmp_path):
    history = HistoryFile(tmp_path / "h.jsonl")
    transport = RecordingTransport(httpx.MockTransport(answer), history, "h1")

    async def renew() -> None:
        async with httpx.AsyncClient(base_url="http://amc.invalid", transport=transport) as http:
            with pytest.raises(httpx.ConnectError):
                await http.post("/v1/tasks/t1/attempts/1/renew", json={"lease_id": "l1"})

    asyncio.run(renew())
    recorded = read([history.path])
    (op,) = recorded.operations
    assert op.kind == "renew" and op.status is None and not op.ok and recorded.unknown == 1
    assert lines(history)[-1]["error"].startswith("ConnectError")
