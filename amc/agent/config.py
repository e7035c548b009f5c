"""What one Host Agent is told at start: where the server and the adb server are, and its pacing."""

from __future__ import annotations

from pathlib import Path

import attrs


@attrs.frozen(kw_only=True)
class AgentConfig:
    """The settings of one `HostAgent` (`amc host run` options).

    Args:
        server: base URL of the control plane, e.g. ``http://127.0.0.1:8000``, or several,
            comma-separated, of servers sharing one store (the leader is followed, `endpoints`).
        token: the host's bearer token (role `host`, bound to `host_id`). Never logged.
        host_id: the host this agent registers and claims as.
        adb_host, adb_port: the adb server that sees the devices.
        keep_artifacts: where to keep a copy of each step's evidence (screenshots, UI dumps,
            logcat excerpts, long outputs), one directory per task and attempt, once uploaded;
            None keeps nothing (the files live in a temporary directory until uploaded).
        lease_seconds: the lease length to ask for in claims; None takes the server's default.
        claim_wait_seconds: how long one claim long-polls (the server allows 0..30).
        scan_seconds: how often adb is asked which devices are attached.
        request_timeout: the longest a single register, claim (beyond its wait) or result
            request may take before it counts as having no answer.
        report_backoff: first and longest pause between retries of a result that got no answer.
        drain_seconds: after a stop is asked for, how long running attempts may go on
            before they stop at their next step boundary and are released.
        forced_release_seconds: after a forced stop, how long releases are retried before
            they are abandoned (their leases then run out on the server).
        record_history: a file to append every claim, start, renewal, result and release
            to, with its times and answer, for the history checker (`amc.check`); None
            records nothing (and wraps nothing).
        input_cache: where the input cache keeps its files; None: `amc-inputs` in the
            system's temporary directory.
        input_cache_bytes: the input cache's bound.
    """

    server: str
    token: str = attrs.field(repr=False)
    host_id: str
    adb_host: str = "127.0.0.1"
    adb_port: int = 5037
    keep_artifacts: Path | None = None
    lease_seconds: float | None = None
    claim_wait_seconds: float = 20.0
    scan_seconds: float = 5.0
    request_timeout: float = 10.0
    report_backoff: tuple[float, float] = (0.1, 5.0)
    drain_seconds: float = 60.0
    forced_release_seconds: float = 5.0
    record_history: Path | None = None
    input_cache: Path | None = None
    input_cache_bytes: int = 4 * 1024**3
