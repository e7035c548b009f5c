"""The tokens file: written once at the first start, then changed by `amc tokens`.

The file is a JSON list of entries (`{"token", "role"}` plus `tenant` for a client or
`host_id` for a host; see specs/protocol.md, "Roles"). It is only ever readable by its
owner (mode 0600 from the moment it exists), and every change is made the same way:
under an exclusive lock on a lock file beside it, the whole new list is checked, written to
a temporary file, flushed to disk and renamed over the old one. A server that watches the
file (`auth.TokenFile`) therefore sees the old list or the new one, never a mix, and two
`amc tokens add` at once both land.

A token is named by its *id*: the first 12 hex digits of its SHA-256. The id is safe to
print and to type (`amc tokens revoke ID`); the token itself is printed once, when added.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import secrets
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from amc.adapters.http.auth import TokenFileError, TokenTable

ID_DIGITS = 12


def new_token() -> str:
    return secrets.token_urlsafe(32)


def token_id(token: str) -> str:
    """The printable name of a token: a prefix of its SHA-256, from which it cannot be found."""
    return hashlib.sha256(token.encode("utf-8", "surrogatepass")).hexdigest()[:ID_DIGITS]


def describe(entry: dict[str, Any]) -> dict[str, Any]:
    """An entry without its secret: id, role and scope."""
    shown = {"id": token_id(entry["token"]), "role": entry["role"]}
    for member in ("tenant", "host_id"):
        if member in entry:
            shown[member] = entry[member]
    return shown


def read(path: Path) -> list[dict[str, Any]]:
    """The entries of a tokens file, checked; TokenFileError if it cannot be used."""
    try:
        entries: list[dict[str, Any]] = json.loads(path.read_text(encoding="utf-8"))  # checked below
    except FileNotFoundError:
        raise TokenFileError(f"no tokens file at {path}") from None
    except (OSError, ValueError) as error:
        raise TokenFileError(f"cannot read tokens file {path}: {type(error).__name__}") from None
    TokenTable.from_data(entries)
    return entries


def write_initial(path: Path, tenant: str = "default", host_id: str = "h1") -> list[dict[str, Any]]:
    """Create a tokens file with one admin, one client and one host token; never overwrite one."""
    entries = [
        {"token": new_token(), "role": "admin"},
        {"token": new_token(), "role": "client", "tenant": tenant},
        {"token": new_token(), "role": "host", "host_id": host_id},
    ]
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as out:
        json.dump(entries, out, indent=2)
        out.write("\n")
    return entries


def add(path: Path, role: str, *, tenant: str | None = None, host_id: str | None = None) -> dict[str, Any]:
    """Append a new token of `role` to the file (creating it if need be); the new entry, token included."""
    entry: dict[str, Any] = {"token": new_token(), "role": role}
    if tenant is not None:
        entry["tenant"] = tenant
    if host_id is not None:
        entry["host_id"] = host_id
    with _locked(path):
        entries = read(path) if path.exists() else []
        _replace(path, [*entries, entry])
    return entry


def revoke(path: Path, ident: str) -> dict[str, Any]:
    """Remove the one token whose id starts with `ident`; its description (no secret)."""
    if len(ident) < 4:
        raise TokenFileError("give at least 4 digits of the token's id (amc tokens list shows them)")
    with _locked(path):
        entries = read(path)
        matching = [entry for entry in entries if token_id(entry["token"]).startswith(ident.lower())]
        if not matching:
            raise TokenFileError(f"no token with an id starting {ident!r} in {path}")
        if len(matching) > 1:
            raise TokenFileError(f"{len(matching)} tokens have ids starting {ident!r}; give more digits")
        _replace(path, [entry for entry in entries if entry is not matching[0]])
    return describe(matching[0])


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path.with_name(path.name + ".lock"), os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing the descriptor releases the lock


def _replace(path: Path, entries: list[dict[str, Any]]) -> None:
    TokenTable.from_data(entries)  # never write a file the server would refuse
    fd, temporary = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)  # mode 0600
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            json.dump(entries, out, indent=2)
            out.write("\n")
            out.flush()
            os.fsync(out.fileno())
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temporary)
        raise
    directory = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(directory)
    finally:
        os.close(directory)
