"""The leader SIGKILLed while a watch, a claim long poll, a session's action wait and a reader of
the event stream are open on it: each reaches the new leader (specs/protocol.md "Clients never
hang", BOUNDED/s3), and the operators are told (LEADER/s1 to LEADER/s3).

`make test` runs two kill offsets, one of them about 2 s after the watch started (where the
watch used to hang for good); `make watch-failover` runs ten at each of several offsets
(bench/watch_failover.py) and prints the figures of docs/reliability.md.
"""

from __future__ import annotations

import pytest

from tests.support.client_failover import run_once

pytestmark = pytest.mark.timeout(180)


@pytest.mark.req("BOUNDED/s3", "BOUNDED/s5", "LEADER/s1", "LEADER/s2", "LEADER/s3")
@pytest.mark.parametrize("offset", [0.5, 2.0])
def test_every_client_follows_a_sigkilled_leader_to_the_new_one(pg_url, tmp_path, offset):
    run = run_once(pg_url, tmp_path, offset)
    assert run.hung() == [], (run, run.figures())
    # The watch saw the end that happened on the new leader, and said nothing about going on
    assert run.watch_exit == 1, run.watch_output  # cancelled: "the answer is no"
    assert "ended cancelled (failover test)" in run.watch_output or "ended cancelled" in run.watch_output
    assert "goes on" not in run.watch_output
    # The operators were told: the standby said it stood by, then that it leads
    assert "; standing by (another server leads); listening on " in run.leader_lines[0], run.leader_lines
    assert any(line.startswith("amc serve: now leading (epoch ") for line in run.leader_lines[1:]), run.leader_lines
    assert run.leader_metric == "amc_leader 1.0" and run.standby_metric == "amc_leader 0.0"
    # ... and the host's client logged a change of leader, not an outage
    changes = [line for line in run.agent_log if "leader changed from" in line]
    assert len(changes) == 1, run.agent_log
    assert not [line for line in run.agent_log if line.startswith("ERROR")], run.agent_log
