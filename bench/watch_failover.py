"""The leader SIGKILLed under open clients, again and again: `make watch-failover`.

Each run (tests/support/client_failover.py): two `amc serve` on a new database of a throwaway
PostgreSQL cluster (fsync on); `amc task watch`, a claim long poll, a session's action wait
and a reader of the event stream open against the leader through amc's own clients; the
leader SIGKILLed OFFSET seconds after the watch started. A run passes when every client
reached the new leader within the stream's silence bound (twice the keep-alive) plus a
request timeout beyond the takeover, and the watch reported the task's end.

Run: PYTHONPATH=. python -P bench/watch_failover.py [--runs 10] [--offsets 0.5,1,2,3,5,10]
Prints, per offset, the passes and the seconds from the kill to each client's arrival on the
new leader (median and largest), the figures of docs/reliability.md; exits 1 if a run failed.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from pathlib import Path

from tests.support.client_failover import SLACK_SECONDS, Run, run_once, summary
from tests.support.postgres import Cluster

SLOW_WATCH_SECONDS = 10.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10, help="runs at each offset")
    parser.add_argument("--offsets", default="0.5,1,2,3,5,10", help="seconds from the watch's start to the kill")
    args = parser.parse_args()
    offsets = [float(text) for text in args.offsets.split(",")]
    scratch = Path(tempfile.mkdtemp(prefix="amc-watch-failover-"))
    failed = 0
    everything: list[Run] = []
    try:
        with Cluster(fsync=True) as cluster:
            for offset in offsets:
                runs: list[Run] = []
                for n in range(args.runs):
                    run = run_once(cluster.new_database("watch"), scratch / f"{offset:g}-{n}", offset)
                    ended = run.watch_exit == 1 and "ended cancelled" in run.watch_output
                    if run.hung() or not ended:
                        failed += 1
                        print(f"offset {offset:g} s, run {n + 1}: FAILED {run.hung()} {run.figures()}", flush=True)
                        print(run.watch_output, flush=True)
                    elif (run.watch or 0) > SLOW_WATCH_SECONDS:  # within the bound, but worth a look
                        print(f"offset {offset:g} s, run {n + 1}: slow watch {run.figures()}", flush=True)
                        print(run.watch_output, flush=True)
                    runs.append(run)
                everything += runs
                passed = sum(1 for run in runs if not run.hung() and run.watch_exit == 1)
                print(f"offset {offset:g} s: {passed} of {len(runs)} passed; {_line(summary(runs))}", flush=True)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    print()
    print(f"all offsets ({len(everything)} runs): {_line(summary(everything))}")
    print(f"bound per run: takeover + {SLACK_SECONDS:g} s; failed runs: {failed}")
    sys.exit(1 if failed else 0)


def _line(table: dict[str, dict[str, float | None]]) -> str:
    def shown(value: float | None) -> str:
        return "-" if value is None else f"{value:.2f}"

    return "; ".join(
        f"{name} {shown(row['median'])}/{shown(row['max'])} s"
        + (f" ({row['missing']} missing)" if row["missing"] else "")
        for name, row in table.items()
    )


if __name__ == "__main__":
    main()
