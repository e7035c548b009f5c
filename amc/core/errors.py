"""Typed rejections: the kernel's only way to say no.

A rejection is a value, not a raised exception, because `decide` returns it; each carries
the protocol's error code and the HTTP status that code implies.
"""

from __future__ import annotations

import enum

import attrs


class Code(enum.Enum):
    """The protocol's error codes, each with its HTTP status."""

    invalid_request = 400
    not_found = 404
    idempotency_conflict = 409
    task_terminal = 409
    lease_foreign = 409
    lease_unknown = 409
    lease_replaced = 409
    lease_ended = 409
    lease_expired = 409
    result_conflict = 409
    no_cancellation_requested = 409
    message_conflict = 409
    artifact_conflict = 409
    not_a_session = 409
    session_ended = 409
    action_conflict = 409
    payload_too_large = 413

    http_status: int  # set per member by __new__; a bare annotation is not a member

    # Enum members with equal values would alias each other: keep them distinct by name.
    def __new__(cls, status: int) -> Code:
        member = object.__new__(cls)
        member._value_ = len(cls.__members__)
        member.http_status = status
        return member


@attrs.frozen
class Rejection:
    """A command the kernel refused; the state is exactly as it was."""

    code: Code
    detail: str

    @property
    def http_status(self) -> int:
        return self.code.http_status


class InvalidRequest(ValueError):
    """Input that is not a well-formed command (raised while building one, before the kernel)."""

    def __init__(self, detail: str):
        super().__init__(detail)
        self.detail = detail
