"""A TCP proxy on loopback that a test controls: the network between a Host Agent and its server.

    proxy = Proxy(server_port)          # relays 127.0.0.1:proxy.port <-> 127.0.0.1:server_port
    proxy.partition("blackhole")        # a dead link: nothing passes, connections hang
    proxy.partition("reset")            # a refusing link: connections are reset at once
    proxy.heal()                        # the link is back, for new connections
    proxy.retarget(new_port)            # new connections go to a restarted server

It runs in the test's process, on threads: one accepting, two per connection (one per
direction). It knows nothing of HTTP; it only forwards bytes, or stops forwarding them.
"""

from __future__ import annotations

import contextlib
import socket
import struct
import threading
import time
from typing import Literal

Mode = Literal["blackhole", "reset"]


def reset(sock: socket.socket) -> None:
    """Close `sock` with a TCP reset (RST), not a FIN: a link that refuses, not a peer that hung up."""
    with contextlib.suppress(OSError):
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    # A thread blocked reading the socket keeps it open past close(); shutting its reading
    # side wakes that thread, and the socket is then really closed, with the reset.
    with contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_RD)
    with contextlib.suppress(OSError):
        sock.close()


class Proxy:
    """Forwards TCP connections to an upstream port; can partition (blackhole or reset) and heal.

    - `partition("blackhole")`: nothing is relayed in either direction; connections stay
      open and new ones are accepted and held, so requests hang as behind a dead link.
    - `partition("reset")`: every open connection is reset, and every new one is reset as
      soon as it is accepted.
    - `heal()`: forwarding resumes for new connections; those that lived through a
      blackhole are reset (what they carried is lost, as when a dead link comes back).
    - `retarget(port)`: new connections go to `port` (a server restarted on another port).
    """

    def __init__(self, upstream_port: int):
        self.upstream = ("127.0.0.1", upstream_port)
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self._lock = threading.Lock()
        self._mode: Mode | None = None
        self._closed = False
        self._links: set[_Link] = set()
        self.connections = 0  # accepted, in all
        threading.Thread(target=self._accept, name=f"proxy-{self.port}", daemon=True).start()

    @property
    def partitioned(self) -> Mode | None:
        return self._mode

    def partition(self, mode: Mode = "blackhole") -> None:
        with self._lock:
            self._mode = mode
            links = list(self._links)
        if mode == "reset":
            for link in links:
                link.close(hard=True)

    def heal(self) -> None:
        with self._lock:
            self._mode = None
            stale = [link for link in self._links if link.partitioned]
        for link in stale:
            link.close(hard=True)

    def retarget(self, port: int) -> None:
        self.upstream = ("127.0.0.1", port)

    def close(self) -> None:
        self._closed = True
        self._listener.close()
        with self._lock:
            links = list(self._links)
        for link in links:
            link.close(hard=True)

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            self.connections += 1
            if self._mode == "reset":
                reset(client)
                continue
            link = _Link(self, client)
            with self._lock:
                self._links.add(link)
            threading.Thread(target=link.run, daemon=True).start()

    def _forget(self, link: _Link) -> None:
        with self._lock:
            self._links.discard(link)


class _Link:
    """One client connection and its upstream connection."""

    def __init__(self, proxy: Proxy, client: socket.socket):
        self.proxy = proxy
        self.client = client
        self.upstream: socket.socket | None = None
        self.partitioned = False  # lived through a blackhole: reset when the link heals
        self._closed = False

    def _hold(self) -> bool:
        """Wait out a blackhole; False if the link was closed meanwhile."""
        while self.proxy.partitioned == "blackhole" and not self._closed:
            self.partitioned = True
            time.sleep(0.01)
        return not self._closed and not self.partitioned

    def run(self) -> None:
        if not self._hold():
            return self.close(hard=True)
        try:
            self.upstream = socket.create_connection(self.proxy.upstream, timeout=5)
            self.upstream.settimeout(None)
        except OSError:  # nobody listens upstream (a server restarting): refuse like it would
            return self.close(hard=True)
        threading.Thread(target=self._pump, args=(self.upstream, self.client), daemon=True).start()
        self._pump(self.client, self.upstream)

    def _pump(self, source: socket.socket, sink: socket.socket) -> None:
        try:
            while True:
                data = source.recv(65536)
                if not data:
                    break
                if not self._hold():  # what arrived during a blackhole is lost
                    return
                sink.sendall(data)
        except OSError:
            pass
        self.close(hard=False)

    def close(self, hard: bool) -> None:
        if self._closed:
            return
        self._closed = True
        self.proxy._forget(self)
        for sock in (self.client, self.upstream):
            if sock is None:
                continue
            if hard:
                reset(sock)
            else:
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)
                with contextlib.suppress(OSError):
                    sock.close()
