"""When a screen has settled (amc.core.ui.settle): the watch's verdicts over generated samples."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from amc.core.ui.settle import Pending, Settled, SettleWatch, TimedOut

req = pytest.mark.req

quiets = st.sampled_from([0.0, 0.0, 0.05, 0.1, 0.25, 0.5, 1.0])
timeouts = st.sampled_from([0.0, 0.1, 0.5, 1.0, 2.0, 10.0])
# Samples as (gap since the previous one, fingerprint); few fingerprints, so runs of equal ones happen.
samples = st.lists(
    st.tuples(st.sampled_from([0.0, 0.01, 0.05, 0.1, 0.1, 0.1, 0.3, 0.7]), st.sampled_from("aab")),
    min_size=1,
    max_size=40,
)


def fed(watch: SettleWatch, start: float, gaps: list[tuple[float, str]]) -> list[tuple[float, str, object]]:
    """Every sample with its verdict, times from `start`."""
    at, out = start, []
    for gap, fingerprint in gaps:
        at += gap
        out.append((at, fingerprint, watch.sample(at, fingerprint)))
    return out


def run_before(history: list[tuple[float, str, object]], i: int) -> tuple[float, int]:
    """When the run of equal fingerprints ending at sample i began, and how many samples it has."""
    j = i
    while j > 0 and history[j - 1][1] == history[i][1]:
        j -= 1
    return history[j][0], i - j + 1


@req("UI/s9")
@given(quiets, timeouts, st.floats(0, 1000), samples)
def test_settled_only_once_one_fingerprint_held_across_samples_spanning_quiet(quiet, timeout, start, gaps):
    history = fed(SettleWatch(quiet=quiet, timeout=timeout, started_at=start), start, gaps)
    first = next((i for i, (_, _, v) in enumerate(history) if not isinstance(v, Pending)), None)
    for i, (at, fingerprint, verdict) in enumerate(history):
        if isinstance(verdict, Settled) and i == first:
            since, length = run_before(history, i)
            assert verdict.fingerprint == fingerprint
            assert length >= 2 and at - since >= quiet
        if first is None or i < first:
            # Pending: not yet settled by the rule, and the deadline not reached.
            since, length = run_before(history, i)
            assert not (length >= 2 and at - since >= quiet)
            assert at < start + timeout
            assert isinstance(verdict, Pending) and at < verdict.sample_at <= start + timeout
        else:
            assert verdict == history[first][2]  # a decided watch keeps its verdict


@req("UI/s9")
@given(quiets, timeouts, st.floats(0, 1000), samples)
def test_a_sample_at_or_after_the_deadline_always_decides(quiet, timeout, start, gaps):
    for at, _, verdict in fed(SettleWatch(quiet=quiet, timeout=timeout, started_at=start), start, gaps):
        if at >= start + timeout:
            assert isinstance(verdict, Settled | TimedOut)


@req("UI/s9")
@given(quiets, timeouts, st.sampled_from([0.01, 0.1, 0.25]), st.lists(st.sampled_from("ab"), max_size=200))
def test_a_caller_that_samples_when_told_is_decided_by_the_timeout(quiet, timeout, interval, screens):
    """Following `sample_at` (the screen cycling through `screens`, then still), the watch decides
    no later than the deadline."""
    watch = SettleWatch(quiet=quiet, timeout=timeout, started_at=5.0, interval=interval)
    at, shown = 5.0, [*screens]
    for _ in range(10_000):
        verdict = watch.sample(at, shown.pop(0) if shown else "still")
        if not isinstance(verdict, Pending):
            break
        assert verdict.sample_at > at
        at = verdict.sample_at
    assert not isinstance(verdict, Pending)
    assert at <= 5.0 + timeout


@req("UI/s9")
@given(st.lists(st.sampled_from("abc"), min_size=1, max_size=30), st.floats(0.5, 100))
def test_with_quiet_zero_two_consecutive_equal_samples_settle(fingerprints, timeout):
    watch = SettleWatch(quiet=0, timeout=timeout, started_at=0)
    expected = next((i for i in range(1, len(fingerprints)) if fingerprints[i] == fingerprints[i - 1]), None)
    for i, fingerprint in enumerate(fingerprints):
        verdict = watch.sample(i * 0.01, fingerprint)  # all before the deadline
        if expected is None or i < expected:
            assert isinstance(verdict, Pending)
        else:
            assert verdict == Settled(fingerprints[expected])


@req("UI/s9")
def test_wait_for_idle_settles_after_quiet_of_one_fingerprint_and_restarts_on_a_change():
    watch = SettleWatch(quiet=0.5, timeout=10, started_at=0, interval=0.1)
    assert watch.sample(0.0, "a") == Pending(0.1)
    assert watch.sample(0.3, "a") == Pending(0.4)
    assert watch.sample(0.4, "b") == Pending(0.5)  # changed: the quiet starts again from 0.4
    assert watch.sample(0.8, "b") == Pending(0.9)
    assert watch.sample(0.9, "b") == Settled("b")
    assert watch.sample(5.0, "c") == Settled("b")


@req("UI/s9")
def test_timing_out_says_why_in_one_sentence():
    watch = SettleWatch(quiet=0, timeout=2, started_at=0)
    assert watch.sample(0.0, "a") == Pending(0.1)
    assert watch.sample(1.95, "b") == Pending(2.0)  # never past the deadline
    assert watch.sample(2.0, "c") == TimedOut(
        "the screen did not settle within 2 s: no two dumps in a row agreed (it changed 2 times in 3 dumps)"
    )
    quiet = SettleWatch(quiet=0.5, timeout=1, started_at=0)
    quiet.sample(0.0, "a")
    quiet.sample(0.2, "a")
    assert quiet.sample(1.0, "b") == TimedOut(
        "the screen did not settle within 1 s: it never stayed unchanged for 0.5 s (it changed once in 3 dumps)"
    )


def test_samples_out_of_order_and_bad_arguments_are_refused():
    watch = SettleWatch(quiet=0, timeout=2, started_at=0)
    watch.sample(1.0, "a")
    with pytest.raises(ValueError, match="time order"):
        watch.sample(0.5, "a")
    with pytest.raises(ValueError):
        SettleWatch(quiet=-1, timeout=2, started_at=0)
    with pytest.raises(ValueError):
        SettleWatch(quiet=0, timeout=2, started_at=0, interval=0)
