"""A threaded TCP listener that can be shut down quickly and completely.

One thread accepts; each connection gets its own thread running `handler(sock)`. The
handler thread owns its socket and closes it when the handler returns. Others may only
`shutdown()` it, which wakes a blocked recv/select without racing on the file descriptor.
ppadb closes with RST (SO_LINGER 0), so resets and broken pipes are ordinary endings here.
"""

from __future__ import annotations

import select
import socket
import threading
from collections.abc import Callable

PEER_GONE = (ConnectionResetError, BrokenPipeError, ConnectionAbortedError, TimeoutError, OSError)


def shutdown_quietly(sock: socket.socket) -> None:
    """Wake whoever waits on `sock` and send FIN; never raises."""
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass


def recv_exact(sock: socket.socket, count: int) -> bytes | None:
    """Read exactly `count` bytes, or return None if the peer went away first."""
    data = bytearray()
    while len(data) < count:
        try:
            chunk = sock.recv(count - len(data))
        except PEER_GONE:
            return None
        if not chunk:
            return None
        data += chunk
    return bytes(data)


def send_all(sock: socket.socket, data: bytes) -> bool:
    """Send `data` in one sendall (ppadb reads replies with single recv calls)."""
    try:
        sock.sendall(data)
        return True
    except PEER_GONE:
        return False


def wait_readable(sock: socket.socket, timeout: float) -> bool:
    """True when `sock` has data or EOF (or is unusable); False after `timeout`."""
    poller = select.poll()  # not select.select, which cannot watch a descriptor past 1024
    try:
        poller.register(sock, select.POLLIN)
        return bool(poller.poll(timeout * 1000))
    except (ValueError, OSError):
        return True


class TcpListener:
    """Accept loop plus per-connection threads, with a fast, complete `close()`."""

    def __init__(self, host: str, port: int, handler: Callable[[socket.socket], None], *, name: str):
        self._handler = handler
        self._name = name
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._clients: set[socket.socket] = set()
        self._threads: set[threading.Thread] = set()
        self._listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            self._listener.bind((host, port))
        except OSError:
            self._listener.close()
            raise
        self._listener.listen(64)
        self.host: str
        self.port: int
        self.host, self.port = self._listener.getsockname()[:2]
        self._accepter = threading.Thread(target=self._accept_loop, daemon=True, name=f"{name}-accept")

    def start(self) -> None:
        self._accepter.start()

    def _accept_loop(self) -> None:
        while not self._stop.is_set():
            # Polling keeps close() reliable where shutdown() of a listener wakes nothing.
            if not wait_readable(self._listener, 0.1) or self._stop.is_set():
                continue
            try:
                client, _ = self._listener.accept()
            except OSError:
                continue
            client.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            thread = threading.Thread(target=self._serve, args=(client,), daemon=True, name=f"{self._name}-conn")
            with self._lock:
                if self._stop.is_set():
                    client.close()
                    return
                self._clients.add(client)
                self._threads.add(thread)
            thread.start()

    def _serve(self, client: socket.socket) -> None:
        try:
            self._handler(client)
        except PEER_GONE:
            pass
        finally:
            with self._lock:
                self._clients.discard(client)
                self._threads.discard(threading.current_thread())
            client.close()

    def close(self, timeout: float = 2.0) -> None:
        """Stop accepting, cut every connection and wait (bounded) for the handlers."""
        self._stop.set()
        shutdown_quietly(self._listener)  # on Linux this wakes the accept loop's select at once
        if self._accepter.is_alive():
            self._accepter.join(timeout)
        self._listener.close()
        with self._lock:
            clients, threads = list(self._clients), list(self._threads)
        for client in clients:
            shutdown_quietly(client)
        for thread in threads:
            thread.join(timeout)
