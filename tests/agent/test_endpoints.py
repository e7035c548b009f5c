"""The rules for following the leader among several URLs (amc.leader), without IO:
the order, when a client moves on, and the pause while no server leads."""

from __future__ import annotations

import httpx
import pytest

from amc.leader import Endpoints, is_standby, never_sent, parse_urls, retry_after

A, B, C = "http://a:8000", "http://b:8000", "http://c:8000"


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_urls_are_read_in_order_from_commas_and_lists():
    assert parse_urls(f" {A}/, {B} ,,{A}") == (A, B)
    assert parse_urls([A, f"{B},{C}"]) == (A, B, C)
    assert parse_urls(A) == (A,)
    with pytest.raises(ValueError):
        parse_urls(" , ")


@pytest.mark.req("HA/s5")
def test_a_round_starts_at_the_current_url_and_moves_past_the_ones_passed_over():
    endpoints = Endpoints([f"{A},{B},{C}"])
    assert endpoints.current == A and endpoints.round() == [A, B, C]
    endpoints.passed_over(A)
    assert endpoints.current == B and endpoints.round() == [B, C, A]
    endpoints.passed_over(A)  # another request already moved past A: nothing more moves
    assert endpoints.current == B
    endpoints.answered(C)
    assert endpoints.current == C and endpoints.round() == [C, A, B]
    endpoints.passed_over(C)
    assert endpoints.current == A  # round and round


@pytest.mark.req("HA/s5")
def test_only_a_503_not_leader_or_a_standby_health_says_not_the_leader():
    assert is_standby(503, b'{"type": "urn:amc:problem:not_leader", "status": 503, "code": "not_leader"}')
    assert is_standby(503, b'{"status": "standby"}')
    assert not is_standby(503, b'{"code": "storage_unavailable"}')  # the leader, in trouble: stay
    assert not is_standby(503, b"<html>Service Unavailable</html>")  # a proxy: stay
    assert not is_standby(200, b'{"status": "ok"}')
    assert not is_standby(409, b'{"code": "not_leader"}')


@pytest.mark.req("HA/s6")
def test_only_errors_before_sending_count_as_never_sent():
    request = httpx.Request("POST", A)
    assert never_sent(httpx.ConnectError("refused", request=request))
    assert never_sent(httpx.ConnectTimeout("no handshake", request=request))
    assert never_sent(httpx.UnsupportedProtocol("ftp://"))
    # after the request left: it may have taken effect
    assert not never_sent(httpx.ReadTimeout("slow", request=request))
    assert not never_sent(httpx.RemoteProtocolError("cut", request=request))
    assert not never_sent(httpx.ReadError("reset", request=request))
    assert not never_sent(httpx.WriteError("reset", request=request))


@pytest.mark.req("HA/s8")
def test_a_round_without_a_leader_starts_a_shared_pause_that_backs_off_honours_retry_after_and_is_bounded():
    clock = Clock()
    endpoints = Endpoints([A, B], backoff=(0.1, 0.4), max_pause=5.0, clock=clock)
    assert endpoints.wait_seconds() == 0
    assert endpoints.no_leader() == pytest.approx(0.1)
    assert endpoints.wait_seconds() == pytest.approx(0.1)
    clock.now += 0.05
    assert endpoints.wait_seconds() == pytest.approx(0.05)  # every request waits out the same pause
    assert [endpoints.no_leader() for _ in range(3)] == pytest.approx([0.2, 0.4, 0.4])  # doubles up to the cap
    assert endpoints.no_leader(retry_after=2.0) == pytest.approx(2.0)  # the standby asked for longer
    assert endpoints.no_leader(retry_after=60.0) == pytest.approx(5.0)  # but never more than max_pause
    endpoints.answered(B)  # a leader: no pause, and the backoff starts over
    assert endpoints.wait_seconds() == 0
    assert endpoints.no_leader() == pytest.approx(0.1)


def test_retry_after_is_read_in_seconds_only():
    assert retry_after("2") == 2.0
    assert retry_after(" 0.5 ") == 0.5
    assert retry_after(None) is None
    assert retry_after("Wed, 21 Oct 2026 07:28:00 GMT") is None
    assert retry_after("-1") is None


@pytest.mark.req("LEADER/s3")
def test_a_change_of_leader_is_told_once_and_a_search_for_one_is_timed():
    changes: list[tuple[str, str]] = []
    clock = Clock()
    endpoints = Endpoints([A, B], clock=clock, on_change=lambda old, new: changes.append((old, new)))
    endpoints.answered(A)  # the first answer is no change
    endpoints.answered(A)
    assert endpoints.leader == A and changes == [] and endpoints.lost_since is None
    endpoints.passed_over(A)
    endpoints.no_leader(1.0)  # a round found none: the search began now
    clock.now += 3
    endpoints.no_leader(1.0)  # still the same search
    assert endpoints.lost_since == 100.0
    endpoints.answered(B)
    assert changes == [(A, B)] and endpoints.leader == B and endpoints.lost_since is None
    endpoints.answered(B)
    assert changes == [(A, B)]
