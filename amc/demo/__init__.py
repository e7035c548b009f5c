"""The demo: a small workload on a local stack, and the verdict on how each task ended.

- `workload`: the jobs, their plans and `check`, what the protocol says each must end as;
- `run`: `DemoRun`, which starts the stack, submits, steers, cancels, kills a host and
  prints the live table and the summary. `amc demo` (amc.cli.demo) is its command line.
"""
