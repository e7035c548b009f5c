"""Failover under load: kill the leader again and again; count what callers were told and what stayed.

Two `amc serve --store postgresql://...` processes share one database (a throwaway cluster,
fsync on). Load runs the whole time, through plain HTTP clients that find the leader
themselves (tests/support/failover.py): Host Agents (claim, start, renew every second, report
a result after a few renewals) and clients (submit with an idempotency key, cancel, post a
message). Every few seconds the leader is SIGKILLed and started again (as the new standby).

After each kill: the time until the standby led (its health 200) and until the first renewal
that succeeded on it. At the end, with the load stopped: every command whose 2xx a caller
received is checked against the database (a submitted task exists; a result stands; a
cancel is recorded or the task ended; a message is there), the log replayed equals the
records and the invariants hold (`verify`), and the attempts the hosts held across a kill
renewed with the same lease id; leases that lapsed are counted (`lease_expired` events).

Run: PYTHONPATH=. python -P bench/failover.py [--kills 10] [--interval 4] [--hosts 4]
Every request of the hosts and clients is recorded, and the history checker (`amc.check`)
judges the histories against the final state.

Prints the figures of docs/reliability.md's failover table; exits 1 if anything acknowledged was
lost or the history checker found a violation.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import tempfile
from pathlib import Path

from tests.support.failover import run_failover
from tests.support.postgres import Cluster


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kills", type=int, default=10)
    parser.add_argument("--interval", type=float, default=4.0, help="seconds of load between kills")
    parser.add_argument("--hosts", type=int, default=4)
    parser.add_argument("--clients", type=int, default=2)
    args = parser.parse_args()
    scratch = Path(tempfile.mkdtemp(prefix="amc-failover-"))
    try:
        with Cluster(fsync=True) as cluster:
            report = run_failover(
                cluster,
                scratch,
                kills=args.kills,
                interval=args.interval,
                hosts=args.hosts,
                clients=args.clients,
                progress=lambda line: print(line, flush=True),
            )
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    print()
    print(f"kills: {len(report.takeovers)}; acknowledged commands: {sum(report.counts.values())} ({report.counts})")
    print(
        f"kill -> standby leads: median {statistics.median(report.takeovers):.2f} s, max {max(report.takeovers):.2f} s; "
        f"kill -> first successful renewal: median {statistics.median(report.first_renewals):.2f} s, "
        f"max {max(report.first_renewals):.2f} s ({len(report.first_renewals)} kills)"
    )
    print(f"renewals with a lease granted before a kill that succeeded after it: {report.kept_leases}")
    print(f"acknowledged commands checked: {report.checked}; lost or wrong: {len(report.lost)}")
    for line in report.lost[:20]:
        print("  " + line)
    print(f"verify (replayed log = records, invariants): {'OK' if not report.differences else report.differences[:5]}")
    print(f"history checker: {report.history.summary()}")
    for violation in report.history.violations[:20]:
        print(f"  [{violation.rule}] {violation.detail}")
    if report.lost or report.differences or not report.history.ok:
        raise SystemExit(1)


if __name__ == "__main__":
    main()
