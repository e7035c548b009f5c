"""What the HTTP edge needs to know about its deployment, and the limits it enforces.

The limits live here, not in the kernel: they bound what one request may carry (so a
single caller cannot make the server parse, store or replay something huge), which is a
property of the edge. The kernel accepts any well-formed command.
"""

from __future__ import annotations

import attrs

MiB = 1024 * 1024


@attrs.frozen(kw_only=True)
class Limits:
    """Bounds on request bodies; a request beyond one is refused (413 or 400)."""

    max_body_bytes: int = 1 * MiB
    # Plans have their own bounds (1000 steps, 100 stages): see `amc.core.plans`.
    max_id_length: int = 128  # serials, tenants, host ids
    max_string_length: int = 65_536  # a shell command, a text to type, an output
    max_map_entries: int = 64  # labels, requirement attributes, device attributes
    max_map_string_length: int = 256  # keys and values of those maps
    max_metadata_bytes: int = 64 * 1024  # a result's metadata, and a message's data, as compact JSON
    max_message_text_length: int = 16 * 1024  # a message's free-form text
    max_devices: int = 256  # in one inventory or one claim filter
    max_reason_length: int = 1024
    max_wait_seconds: float = 30.0
    max_clock_advance_seconds: float = 10 * 365 * 86_400.0


@attrs.frozen(kw_only=True)
class EventSettings:
    """The event stream's bounds (`GET /v1/events`, specs/protocol.md Part E)."""

    keepalive_seconds: float = 15.0  # a `: keep-alive` comment after this long without an event
    ring_events: int = 10_000  # the latest events kept for a reconnecting reader to catch up on
    queue_events: int = 1_000  # events one reader may fall behind before it is sent a reset
    liveness_check_seconds: float = 1.0  # how often hosts going online or offline are looked for

    def __attrs_post_init__(self) -> None:
        if not (self.keepalive_seconds > 0 and self.liveness_check_seconds > 0):
            raise ValueError("event stream intervals must be more than 0 seconds")
        if not (self.ring_events >= 1 and self.queue_events >= 1):
            raise ValueError("event stream buffers must hold at least 1 event")


@attrs.frozen(kw_only=True)
class Settings:
    """The deployment choices of one server (`amc serve` options)."""

    lease_seconds: float = 30.0
    min_lease_seconds: float = 1.0
    max_lease_seconds: float = 600.0
    manual_clock: bool = False  # True: POST /v1/admin/clock exists
    host_timeout_seconds: float = 60.0  # a host is online while seen within this long
    limits: Limits = attrs.field(factory=Limits)
    # Part C: an artifact's bytes are streamed to the blob store, not held like a body, so
    # their bounds are the operator's choice rather than the 1 MiB of a JSON body.
    max_artifact_bytes: int = 16 * MiB
    max_task_artifact_bytes: int = 256 * MiB
    # Part F: inputs are streamed to the blob store too. One input (an app) may be large; a
    # tenant's together are bounded so that one tenant cannot fill the disk.
    max_input_bytes: int = 512 * MiB
    max_tenant_input_bytes: int = 4096 * MiB
    # Long-polling claims that may wait at once, in all and per host; a claim beyond either
    # is answered at once, as if it had asked for no wait. A Host Agent waits one claim per
    # device, and an inventory holds at most 256 devices (`Limits.max_devices`).
    max_waiting_claims: int = 1024
    max_waiting_claims_per_host: int = 256
    events: EventSettings = attrs.field(factory=EventSettings)

    def __attrs_post_init__(self) -> None:
        if not 0 < self.min_lease_seconds <= self.lease_seconds <= self.max_lease_seconds:
            raise ValueError("lease seconds must satisfy 0 < min-lease-seconds <= lease-seconds <= max-lease-seconds")
        if not 0 <= self.max_artifact_bytes <= self.max_task_artifact_bytes:
            raise ValueError("artifact limits must satisfy 0 <= max-artifact-bytes <= max-task-artifact-bytes")
        if not 0 <= self.max_input_bytes <= self.max_tenant_input_bytes:
            raise ValueError("input limits must satisfy 0 <= max-input-bytes <= max-tenant-input-bytes")
        if min(self.max_waiting_claims, self.max_waiting_claims_per_host) < 0:
            raise ValueError("max-waiting-claims and max-waiting-claims-per-host must be at least 0")
        if not self.host_timeout_seconds > 0:
            raise ValueError("host-timeout must be more than 0 seconds")
