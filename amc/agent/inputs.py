"""The Host Agent's input cache (specs/protocol.md Part F, "The Host Agent and inputs").

An action that takes an input (an APK to install, a file to push) asks the cache for a local
file holding its bytes: ``path = await cache.path_for({"input": "sha256:..."})``. The cache

- downloads each input once per host (`GET /v1/inputs/{sha256}`) into ``DIR/<sha256>`` and
  reuses it across tasks and devices; concurrent asks for one input share one download;
- checks the sha256 of a download before it is used, and of a cached entry each time it is
  handed out, so a damaged entry is fetched again rather than installed;
- resumes a download cut mid-way from the bytes that arrived (``Range: bytes=N-``, kept in
  ``DIR/tmp/<sha256>.part``), and retries a few times with a pause that doubles;
- keeps its files within `max_bytes`, evicting the entries used longest ago (a file's
  mtime is when it was last handed out).

A file handed out stays readable by whoever opened it even if it is evicted later (unlinking
an open file leaves it to its readers); a caller should open it promptly.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import os
from pathlib import Path

import httpx

from amc.core import inputs

log = logging.getLogger("amc.agent.inputs")

CHUNK_BYTES = 256 * 1024
DEFAULT_MAX_BYTES = 4 * 1024**3
ATTEMPTS = 4
FIRST_PAUSE_S = 0.2


class InputUnavailable(Exception):
    """The input could not be had: the server refused it (404: the host may not read it), or
    every attempt was cut or brought bytes with another sha256."""


class InputCache:
    """Inputs on this host's disk, by sha256 (see the module docstring).

    Args:
        directory: where the entries live (made if missing).
        servers: the server URL, or several comma-separated (the first that answers is used).
        token: the host's bearer token.
        max_bytes: the bound on the entries' bytes together.
        transport: an httpx transport to use instead of TCP (tests).
    """

    def __init__(
        self,
        directory: str | os.PathLike[str],
        servers: str,
        token: str,
        *,
        max_bytes: int = DEFAULT_MAX_BYTES,
        attempts: int = ATTEMPTS,
        transport: httpx.AsyncBaseTransport | None = None,
    ):
        self.directory = Path(directory)
        self._temp = self.directory / "tmp"
        self._temp.mkdir(parents=True, exist_ok=True)
        self._servers = [url.strip().rstrip("/") for url in servers.split(",") if url.strip()]
        self._http = httpx.AsyncClient(
            headers={"Authorization": f"Bearer {token}"}, timeout=httpx.Timeout(30.0), transport=transport
        )
        self.max_bytes = max_bytes
        self._attempts = attempts
        self._locks: dict[str, asyncio.Lock] = {}
        self.fetched_bytes = 0  # bytes received from the server, over the cache's life

    async def aclose(self) -> None:
        await self._http.aclose()

    async def path_for(self, ref: object) -> Path:
        """A local file holding the input `ref` names (``{"input": "sha256:<hex>"}`` or
        ``"sha256:<hex>"``), checked against its sha256. Raises `InputUnavailable`."""
        sha256 = inputs.referenced_sha256(ref if isinstance(ref, dict) else {inputs.KEY: ref})
        if sha256 is None:
            raise ValueError(f"not an input reference: {ref!r}")
        lock = self._locks.setdefault(sha256, asyncio.Lock())
        async with lock:
            path = self.directory / sha256
            if path.exists():
                if await asyncio.to_thread(_digest, path) == sha256:
                    os.utime(path)  # used now: the last to be evicted
                    return path
                log.warning("input cache: %s is damaged; fetching it again", path)
                path.unlink(missing_ok=True)
            await self._download(sha256, path)
            await asyncio.to_thread(self._evict, sha256)
            return path

    def entries(self) -> list[Path]:
        return sorted(p for p in self.directory.iterdir() if p.is_file() and inputs.HEX.fullmatch(p.name))

    # -- fetching ------------------------------------------------------------------------

    async def _download(self, sha256: str, path: Path) -> None:
        part = self._temp / f"{sha256}.part"
        pause = FIRST_PAUSE_S
        why = "no attempt"
        for attempt in range(1, self._attempts + 1):
            try:
                await self._fetch_into(sha256, part)
            except InputUnavailable:
                raise
            except (httpx.HTTPError, OSError) as error:
                why = f"{type(error).__name__}: {error}"
                log.info("input cache: download of %s cut (%s); attempt %d", sha256, why, attempt)
            else:
                if await asyncio.to_thread(_digest, part) == sha256:
                    os.replace(part, path)
                    return
                why = "the bytes had another sha256"
                part.unlink(missing_ok=True)  # start again from nothing
            await asyncio.sleep(pause)
            pause *= 2
        raise InputUnavailable(f"input {sha256}: {why} after {self._attempts} attempts")

    async def _fetch_into(self, sha256: str, part: Path) -> None:
        """Append what the server has beyond `part`'s bytes; return once the body ended."""
        offset = part.stat().st_size if part.exists() else 0
        headers = {"Range": f"bytes={offset}-"} if offset else {}
        last: Exception | None = None
        for url in self._servers:
            try:
                async with self._http.stream("GET", f"{url}/v1/inputs/{sha256}", headers=headers) as response:
                    if response.status_code == 503:
                        last = httpx.HTTPStatusError("a standby", request=response.request, response=response)
                        continue
                    if response.status_code == 404:
                        raise InputUnavailable(f"input {sha256}: 404 (this host may not read it, or it is gone)")
                    if response.status_code not in (200, 206):
                        raise httpx.HTTPStatusError(
                            f"{response.status_code}", request=response.request, response=response
                        )
                    mode = "ab" if response.status_code == 206 else "wb"  # 200: the whole input again
                    with open(part, mode) as file:
                        async for chunk in response.aiter_bytes(CHUNK_BYTES):
                            file.write(chunk)
                            self.fetched_bytes += len(chunk)
                    return
            except httpx.ConnectError as error:
                last = error
        raise last if last is not None else httpx.ConnectError("no server URL")

    # -- eviction ------------------------------------------------------------------------

    def _evict(self, keep: str) -> None:
        """Remove the entries used longest ago until the rest fit within `max_bytes`; never `keep`."""
        found = []
        for path in self.entries():
            with contextlib.suppress(FileNotFoundError):
                stat = path.stat()
                found.append((stat.st_mtime_ns, path, stat.st_size))
        total = sum(size for _, _, size in found)
        for _, path, size in sorted(found):
            if total <= self.max_bytes:
                return
            if path.name == keep:
                continue
            path.unlink(missing_ok=True)
            total -= size


def _digest(path: Path) -> str:
    with open(path, "rb") as file:
        return hashlib.file_digest(file, "sha256").hexdigest()
