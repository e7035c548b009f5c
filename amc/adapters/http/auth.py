"""Bearer tokens: who a request comes from, and what its role lets it touch.

A token has exactly one role: `client` (bound to a tenant), `host` (bound to a host id)
or `admin`. Tokens are looked up by their SHA-256 digest and then compared with
`hmac.compare_digest`, so the time a lookup takes does not depend on how much of a
guessed token matches a real one. Tokens are never logged, echoed or put in an error.

A server reads its tokens from a file (`TokenFile`) and notices when the file changes, so
`amc tokens add` and `amc tokens revoke` take effect without a restart. A changed file that
cannot be used is not applied: the server keeps the tokens it had and logs why.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import os
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Protocol

import attrs

_log = logging.getLogger("amc.tokens")

ROLES = ("client", "host", "admin")
REDACTED = "[token]"  # what a known token reads as wherever the server would otherwise show it
_BINDING = {"client": {"tenant"}, "host": {"host_id"}, "admin": set()}  # the member each role is bound by


@attrs.frozen(kw_only=True)
class Principal:
    """The caller a token stands for."""

    role: str
    tenant: str | None = None  # clients only
    host_id: str | None = None  # hosts only

    @property
    def host(self) -> str:
        """The host a host's token is bound to (ask only once the role is known to be host)."""
        assert self.host_id is not None, f"{self!r} is not a host"
        return self.host_id

    @property
    def scope(self) -> str | None:
        """The tenant a task command is scoped to: the client's, or None for an admin."""
        return self.tenant if self.role == "client" else None

    def __repr__(self) -> str:  # no token in here, but keep reprs short in logs anyway
        bound = self.tenant or self.host_id
        return f"Principal({self.role}{':' + bound if bound else ''})"


class Authenticator(Protocol):
    """What the server asks of its tokens: who an `Authorization` header stands for."""

    def authenticate(self, authorization: str | None) -> Principal | None: ...

    def redact(self, text: str) -> str:
        """`text` with every token this server knows replaced by `REDACTED`."""
        ...


class TokenFileError(ValueError):
    """A tokens file that cannot be used; the message never contains a token."""


def _digest(token: str) -> bytes:
    return hashlib.sha256(token.encode("utf-8", "surrogatepass")).digest()


class TokenTable:
    """Tokens -> principals, with constant-time comparison."""

    def __init__(self, entries: Iterable[tuple[str, Principal]] = ()):
        self._by_digest: dict[bytes, tuple[bytes, Principal]] = {}
        self._tokens: list[str] = []
        for token, principal in entries:
            self.add(token, principal)

    def add(self, token: str, principal: Principal) -> None:
        digest = _digest(token)
        if digest in self._by_digest:
            raise TokenFileError("a token is listed twice")
        self._by_digest[digest] = (token.encode("utf-8", "surrogatepass"), principal)
        self._tokens.append(token)

    def lookup(self, token: str) -> Principal | None:
        found = self._by_digest.get(_digest(token))
        if found is None:
            return None
        stored, principal = found
        # The digests matched; compare the tokens themselves, in constant time, so a
        # digest collision could never stand in for the token.
        return principal if hmac.compare_digest(stored, token.encode("utf-8", "surrogatepass")) else None

    def authenticate(self, authorization: str | None) -> Principal | None:
        """The principal of an `Authorization: Bearer <token>` header, or None."""
        if not authorization:
            return None
        scheme, _, token = authorization.partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            return None
        return self.lookup(token.strip())

    def redact(self, text: str) -> str:
        """`text` with every known token in it replaced by `REDACTED`.

        A caller may paste a token where none belongs (a path, a query, a body member) and
        the server echoes those in access logs and error details; this is how they leave.
        """
        for token in self._tokens:
            if token in text:
                text = text.replace(token, REDACTED)
        return text

    def __len__(self) -> int:
        return len(self._by_digest)

    @classmethod
    def from_data(cls, data: object) -> TokenTable:
        """Parse the tokens file format of specs/protocol.md (a JSON list of objects)."""
        if not isinstance(data, list):
            raise TokenFileError("a tokens file holds a JSON list of token objects")
        table = cls()
        for index, item in enumerate(data):
            where = f"entry {index}"
            if not isinstance(item, dict):
                raise TokenFileError(f"{where}: not an object")
            token, role = item.get("token"), item.get("role")
            if not isinstance(token, str) or not token.strip() or token != token.strip():
                raise TokenFileError(f"{where}: token must be a non-empty string without surrounding spaces")
            if role not in ROLES:
                raise TokenFileError(f"{where}: role must be one of {', '.join(ROLES)}")
            extra = set(item) - {"token", "role"} - _BINDING[role]

            if extra:
                raise TokenFileError(f"{where}: unknown member(s) {', '.join(sorted(extra))} for role {role}")
            if role == "client":
                tenant = item.get("tenant")
                if not isinstance(tenant, str) or not tenant:
                    raise TokenFileError(f"{where}: a client token needs a tenant")
                table.add(token, Principal(role="client", tenant=tenant))
            elif role == "host":
                host_id = item.get("host_id")
                if not isinstance(host_id, str) or not host_id:
                    raise TokenFileError(f"{where}: a host token needs a host_id")
                table.add(token, Principal(role="host", host_id=host_id))
            else:
                table.add(token, Principal(role="admin"))
        return table

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> TokenTable:
        try:
            data = json.loads(Path(path).read_text(encoding="utf-8"))
        except (OSError, ValueError) as error:
            raise TokenFileError(f"cannot read tokens file {path}: {type(error).__name__}") from None
        return cls.from_data(data)


class TokenFile:
    """The tokens of a file, re-read when the file changes.

    The file's identity (inode, size, modification time) is looked at no more often than
    every `recheck` seconds, so a busy server pays one `stat` per interval, not per request.
    Writers replace the file atomically (`amc tokens` does), so a reader never sees half a file.

    Args:
        path: the tokens file (the format of `TokenTable.from_data`).
        recheck: seconds between looks at the file.
        clock: a monotonic clock in seconds (tests pass their own).
    """

    def __init__(
        self, path: str | os.PathLike[str], *, recheck: float = 1.0, clock: Callable[[], float] = time.monotonic
    ):
        self.path = Path(path)
        self._recheck = recheck
        self._clock = clock
        self._seen = self._signature()
        self._table = TokenTable.load(self.path)  # a bad file at start-up is the caller's error
        self._checked_at = clock()

    def _signature(self) -> tuple[int, int, int] | None:
        try:
            info = self.path.stat()
        except OSError:
            return None
        return info.st_ino, info.st_size, info.st_mtime_ns

    @property
    def table(self) -> TokenTable:
        now = self._clock()
        if now - self._checked_at >= self._recheck:
            self._checked_at = now
            self._reload_if_changed()
        return self._table

    def _reload_if_changed(self) -> None:
        signature = self._signature()
        if signature != self._seen:
            self._seen = signature
            try:
                self._table = TokenTable.load(self.path)
                _log.info("tokens reloaded from %s: %d token(s)", self.path, len(self._table))
            except TokenFileError as error:  # the message never holds a token
                _log.warning("tokens file changed but cannot be used, keeping the previous tokens: %s", error)

    def authenticate(self, authorization: str | None) -> Principal | None:
        principal = self.table.authenticate(authorization)
        if principal is None:
            # A token added a moment ago (`amc tokens add`, then at once `amc host run`) must
            # not be refused for the rest of the recheck interval: an unknown token looks at
            # the file now. That costs one `stat`, and a reload only when the file changed.
            self._checked_at = self._clock()
            self._reload_if_changed()
            principal = self._table.authenticate(authorization)
        return principal

    def redact(self, text: str) -> str:
        return self.table.redact(text)

    def __len__(self) -> int:
        return len(self.table)
