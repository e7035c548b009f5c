"""The ADB adapter: what the Host Agent uses to find and drive Android devices.

- `client.BoundedClient`: a ppadb client whose calls cannot hang (idle timeouts, and
  wall-clock deadlines and interrupts through `guard.Stopper`).
- `discovery`: devices in state `device` and their attributes (model, manufacturer,
  sdk, screen_size).
- `executor.AdbExecutor`: runs plan actions on one device; `interrupt()` from any thread.
- `policy.ActionPolicy`: the host's allow/deny rules for actions, shell commands, packages.
- `errors`: StepFailed (DeviceUnavailable, StepTimedOut), Interrupted, ActionRefused.
- `simulator`: protocol-level simulated devices for tests (`amc sim` runs one).

Nothing here is imported by `amc.core`; ppadb is imported only through `_ppadb`.
"""
