"""Columns of a batch as PostgreSQL arrays in the binary wire format, encoded here at once.

The writer sends each table's rows of a batch as one array per column (writer.py), as
parameters of its prepared statement (commits.py). psycopg can dump a Python list as an
array, but it inspects every element to choose the array's type and dumps them one by one
in Python; that was a fifth of the writer's time. The format is small (header, dimensions,
then each element as its length and bytes, or -1 for NULL), so the writer builds the
bytes itself.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence

_HEADER = struct.Struct(">iiIii")  # dimensions (1), has nulls, element type, length, lower bound (1)
_EMPTY = struct.Struct(">iiI")  # dimensions (0), has nulls (0), element type
_LENGTH = struct.Struct(">i")
_INT8 = struct.Struct(">iq")  # an element: its length (8) and the value
_NULL = _LENGTH.pack(-1)
_INT8_VALUE = struct.Struct(">q")

INT8_OID, TEXT_OID, BYTEA_OID = 20, 25, 17


def int8_array(values: Sequence[int | None]) -> bytes:
    if not values:
        return _EMPTY.pack(0, 0, INT8_OID)
    has_null = None in values
    body = b"".join(_NULL if value is None else _INT8.pack(8, value) for value in values)
    return _HEADER.pack(1, has_null, INT8_OID, len(values), 1) + body


def bytea_array(values: Sequence[bytes]) -> bytes:
    return _bytes_array(BYTEA_OID, values)


def text_array(values: Sequence[str]) -> bytes:
    return _bytes_array(TEXT_OID, [value.encode() for value in values])


def _bytes_array(oid: int, values: Sequence[bytes]) -> bytes:
    if not values:
        return _EMPTY.pack(0, 0, oid)
    parts = [_HEADER.pack(1, 0, oid, len(values), 1)]
    for value in values:
        parts.append(_LENGTH.pack(len(value)))
        parts.append(value)
    return b"".join(parts)


def int8(value: int) -> bytes:
    """A single int8 parameter."""
    return _INT8_VALUE.pack(value)
