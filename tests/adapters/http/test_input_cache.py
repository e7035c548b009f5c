"""The Host Agent's input cache (amc.agent.inputs) against a real server (INPUT-CACHE)."""

from __future__ import annotations

import asyncio
import hashlib
import os
import time

import pytest

from amc.agent.inputs import InputCache, InputUnavailable
from amc.core import inputs
from tests.adapters.http.conftest import TOKENS
from tests.adapters.http.test_inputs import put

req = pytest.mark.req
MiB = 1024 * 1024


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def held_by_h1(amc, *contents: bytes) -> list[str]:
    """Upload `contents` for acme and let h1 hold an attempt of a task naming them all."""
    digests = [put(amc.acme, data).json()["sha256"] for data in contents]
    steps = [{"id": f"s{i}", "action": "fixture", "args": {"file": inputs.reference(d)}} for i, d in enumerate(digests)]
    amc.acme.submit({"steps": steps})
    amc.h1.register("h1", ["emulator-5554"])
    amc.h1.claim("h1")
    return digests


def cache_of(amc, tmp_path, **options) -> InputCache:
    return InputCache(tmp_path / "cache", amc.url, TOKENS["h1"][0], **options)


@req("INPUT-CACHE/s1", "INPUT-CACHE/s3")
def test_the_second_use_fetches_nothing_and_a_damaged_entry_is_fetched_again(amc, fixture_action, tmp_path):
    data = os.urandom(2 * MiB)
    [digest] = held_by_h1(amc, data)

    async def run():
        cache = cache_of(amc, tmp_path)
        try:
            first = await cache.path_for(inputs.reference(digest))
            fetched = cache.fetched_bytes
            second = await cache.path_for("sha256:" + digest)
            assert first == second and first.read_bytes() == data
            assert (fetched, cache.fetched_bytes) == (len(data), len(data))  # nothing the second time
            with open(first, "r+b") as file:  # damage it on disk
                file.write(b"\x00" * 10)
            third = await cache.path_for(inputs.reference(digest))
            assert third.read_bytes() == data and cache.fetched_bytes == 2 * len(data)
        finally:
            await cache.aclose()

    asyncio.run(run())


@req("INPUT-CACHE/s2")
def test_a_cut_download_is_resumed_from_where_it_stopped(amc, fixture_action, tmp_path):
    data = os.urandom(MiB + 12345)
    [digest] = held_by_h1(amc, data)
    cache = cache_of(amc, tmp_path)
    (cache.directory / "tmp" / f"{digest}.part").write_bytes(data[:500_000])  # what a cut left

    async def run():
        try:
            path = await cache.path_for(inputs.reference(digest))
            assert sha(path.read_bytes()) == digest
            assert cache.fetched_bytes == len(data) - 500_000  # only the rest came
        finally:
            await cache.aclose()

    asyncio.run(run())


@req("INPUT-CACHE/s2")
def test_a_partial_download_with_wrong_bytes_is_fetched_whole_again(amc, fixture_action, tmp_path):
    data = os.urandom(300_000)
    [digest] = held_by_h1(amc, data)
    cache = cache_of(amc, tmp_path)
    (cache.directory / "tmp" / f"{digest}.part").write_bytes(b"garbage" * 1000)

    async def run():
        try:
            path = await cache.path_for(inputs.reference(digest))
            assert path.read_bytes() == data
        finally:
            await cache.aclose()

    asyncio.run(run())


@req("INPUT-CACHE/s4")
def test_the_cache_keeps_within_its_bound_evicting_the_least_recently_used(amc, fixture_action, tmp_path):
    a, b, c = (os.urandom(100_000) for _ in range(3))
    da, db, dc = held_by_h1(amc, a, b, c)

    async def run():
        cache = cache_of(amc, tmp_path, max_bytes=250_000)
        try:
            for digest in (da, db, da, dc):
                await cache.path_for(inputs.reference(digest))
                time.sleep(0.01)  # distinct mtimes
            assert sorted(p.name for p in cache.entries()) == sorted([da, dc])
        finally:
            await cache.aclose()

    asyncio.run(run())


def test_an_input_the_host_may_not_read_is_unavailable(amc, tmp_path):
    digest = put(amc.acme, b"not for hosts").json()["sha256"]

    async def run():
        cache = cache_of(amc, tmp_path)
        try:
            with pytest.raises(InputUnavailable, match="404"):
                await cache.path_for(inputs.reference(digest))
        finally:
            await cache.aclose()

    asyncio.run(run())
