"""Kernel time is integer milliseconds since the Unix epoch; the wire uses RFC 3339.

Pure conversions only: the kernel never reads a clock, the caller passes `now` in.
"""

from __future__ import annotations

import datetime as _dt

_EPOCH = _dt.datetime(1970, 1, 1, tzinfo=_dt.UTC)


def to_rfc3339(ms: int) -> str:
    """`1_764_460_800_000` -> ``"2025-11-30T00:00:00.000Z"``."""
    moment = _EPOCH + _dt.timedelta(milliseconds=ms)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{ms % 1000:03d}Z"


def from_rfc3339(text: str) -> int:
    """The inverse of `to_rfc3339`; accepts any RFC 3339 offset."""
    moment = _dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
    if moment.tzinfo is None:
        raise ValueError(f"timestamp without offset: {text!r}")
    delta = moment - _EPOCH
    return (delta.days * 86_400 + delta.seconds) * 1000 + delta.microseconds // 1000


def seconds_to_ms(seconds: float) -> int:
    return round(seconds * 1000)
