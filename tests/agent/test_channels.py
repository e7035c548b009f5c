"""`ControlPlane.channel()`: one device's client, with its own connections and the host's
knowledge of which server leads."""

from __future__ import annotations

import asyncio

import httpx

from amc.agent.client import ControlPlane


def test_a_channel_has_its_own_pool_and_shares_the_leader():
    async def main() -> None:
        host = ControlPlane("http://a.invalid,http://b.invalid", "token", "h1")
        first, second = host.channel(), host.channel()
        assert first._http is not host._http and first._http is not second._http
        assert first.endpoints is host.endpoints  # who leads, learnt once for every device
        await first.aclose()
        assert first._http.is_closed and not second._http.is_closed and not host._http.is_closed
        await second.aclose()
        await host.aclose()

    asyncio.run(main())


def test_with_a_given_transport_every_channel_uses_the_hosts_client():
    async def main() -> None:
        transport = httpx.MockTransport(lambda request: httpx.Response(204))
        host = ControlPlane("http://a.invalid", "token", "h1", transport=transport)
        channel = host.channel()
        assert channel._http is host._http
        assert await channel.claim("s1", 0.1, None) is None  # 204: through the given transport
        await channel.aclose()
        assert not host._http.is_closed  # closing a channel leaves the host's client to the host
        await host.aclose()
        assert host._http.is_closed

    asyncio.run(main())
