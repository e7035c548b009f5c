"""`amc demo`: a small workload on a local stack, and the verdict on how each task ended.

- `command`: the click command (options, the run's files, exit status);
- `run`: `DemoRun`, which starts the stack, submits, steers, cancels, kills a host and
  prints the live table and the summary;
- `workload`: the jobs, their plans and `check`, what the protocol says each must end as.
"""
