"""The Host Agent runtime: runs the control plane's tasks on this host's Android devices.

Theory of operation. One asyncio event loop per host does all the talking to the control
plane; the blocking ADB work runs in a thread pool. Every decision about an attempt (stop
or go on, interrupt the running step, each step's outcome, what to report) is made by the
pure `amc.core.execution.Execution`; the modules here only observe and act:

- `host.HostAgent`: the supervisor (discovery, one slot per device, graceful stop);
- `registry`: which devices adb sees, and registering them (PUT /v1/hosts/{id});
- `slot.DeviceSlot`: one device's loop of long-polling claims and attempts;
- `attempt.Attempt`: one attempt as its pieces share it (the claim's answer, the channel,
  the executor, the clock, the Execution), and the one handler of a lease grant, for the
  start and the renewals alike;
- `worker.AttemptRun`: one attempt: start, run, report (retried with the identical body);
  `session.SessionRun`: one session attempt, actions as the caller sends them;
- `renewer.Renewer`: renews the lease every lease_seconds / 3 and feeds the answers in,
  with the messages (steer, pause, resume) they carry;
- `runner.TaskRunner` / `WorkflowRunner`: the step loop, waiting while paused, and
  interrupting a running step;
- `acks.Acknowledger`: sends the message acknowledgements the Execution decides, in order,
  all of them before the result;
- `evidence.Evidence`: uploads each step's evidence (screenshots, UI dumps, logs, long
  outputs) as artifacts before the next step, for the step's outcome to list;
- `clock.ServerClock`: the server's time estimated from lease answers and a monotonic clock;
- `client.ControlPlane`, `wire`: the HTTP calls and their JSON.
- `endpoints.Endpoints`: given several server URLs, which one leads (the CLI follows the
  same rules).

`amc host run` (amc/cli/host.py) runs a `HostAgent` until SIGTERM.
"""
