"""Running the app under uvicorn: in the foreground (`amc serve`) or in a thread (tests).

`AmcServer` adds two things to uvicorn's graceful shutdown: when SIGTERM (or SIGINT)
arrives it releases the long-polling claims at once, so "finish in-flight requests" does
not mean waiting up to 30 s for idle claims; and it exits with status 0 afterwards.
uvicorn stops accepting, lets the in-flight requests finish, and runs the lifespan
shutdown, which closes the store.
"""

from __future__ import annotations

import asyncio
import logging
import socket
import threading
from collections.abc import Callable
from types import FrameType

import uvicorn
from starlette.applications import Starlette

from amc.adapters.http.connections import ConnectionLimits, guarded_protocol


class AmcServer(uvicorn.Server):
    def __init__(self, config: uvicorn.Config, app: Starlette):
        super().__init__(config)
        self._app = app

    def drain(self, loop: asyncio.AbstractEventLoop | None) -> None:
        """Let every waiting long-poll claim answer now, so stopping never waits them out."""
        context = getattr(getattr(self._app, "state", None), "context", None)
        if context is not None and loop is not None and not loop.is_closed():
            loop.call_soon_threadsafe(context.drain)

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        try:
            self.drain(asyncio.get_running_loop())
        except RuntimeError:  # no loop running (yet): nothing waits
            pass
        super().handle_exit(sig, frame)
        # uvicorn re-raises a captured signal after its graceful shutdown, so the process
        # would die of it (exit -15, or a KeyboardInterrupt traceback). A graceful stop is
        # a normal exit for amc serve: status 0.
        captured = getattr(self, "_captured_signals", None)
        if isinstance(captured, list):
            captured.clear()


class RedactTokens(logging.Filter):
    """Blanks the server's tokens out of uvicorn's access log lines: a request line holds no
    header, but a caller may paste a token into its path or query."""

    def __init__(self, redact: Callable[[str], str]):
        super().__init__()
        self.redact = redact

    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.args, tuple):
            record.args = tuple(self.redact(arg) if isinstance(arg, str) else arg for arg in record.args)
        return True


def config(
    app: Starlette,
    host: str,
    port: int,
    *,
    access_log: bool = False,
    log_level: str = "info",
    limits: ConnectionLimits | None = None,
) -> uvicorn.Config:
    """uvicorn settings for amc: HTTP/1.1 keep-alive, uvloop when installed, httptools under
    `connections.GuardedProtocol` (timeouts for slow clients, a cap on connections).

    Access logs are off by default: they cost a good share of the throughput, and they
    are not needed for the audit trail (every command's events are in the task history).
    They never contain tokens either way (uvicorn logs the request line, not headers, and
    `RedactTokens` blanks out a token in the line).
    """
    limits = limits or ConnectionLimits()
    settings = uvicorn.Config(
        app,
        host=host,
        port=port,
        loop="auto",  # uvloop when installed
        http=guarded_protocol(limits),
        lifespan="on",
        access_log=access_log,
        log_level=log_level,
        timeout_keep_alive=limits.keep_alive_timeout,  # type: ignore[arg-type]  # a float works: call_later
        server_header=False,
        date_header=False,
    )
    # After uvicorn.Config, which sets up uvicorn's loggers; one filter, for this app's tokens.
    access = logging.getLogger("uvicorn.access")
    for earlier in [f for f in access.filters if isinstance(f, RedactTokens)]:
        access.removeFilter(earlier)
    redact = getattr(getattr(app, "state", None), "redact", None)
    if redact is not None:
        access.addFilter(RedactTokens(redact))
    return settings


# Files a server holds open besides its connections: the store, blobs being written, the
# loop's own descriptors, logs. Room for them is kept under the limit on open files.
OTHER_FILES = 256


def fit_open_files(max_connections: int) -> int:
    """Raise this process's soft limit on open files so `max_connections` fit, as far as the
    hard limit allows; the number of connections that fit."""
    try:
        import resource
    except ImportError:  # no such limit to raise here
        return max_connections
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = max_connections + OTHER_FILES
    if hard != resource.RLIM_INFINITY:
        wanted = min(wanted, hard)
    if soft != resource.RLIM_INFINITY and soft < wanted:
        resource.setrlimit(resource.RLIMIT_NOFILE, (wanted, hard))
        soft = wanted
    if soft == resource.RLIM_INFINITY:
        return max_connections
    return max(1, min(max_connections, soft - OTHER_FILES))


def listen_socket(host: str, port: int) -> socket.socket:
    """A bound, listening TCP socket for uvicorn to serve on (port 0: any free port).

    The protocol number must be given explicitly: asyncio turns Nagle's algorithm off
    (TCP_NODELAY) only on sockets whose `proto` is IPPROTO_TCP, and a socket made with
    proto 0 leaves it on. With Nagle on, a response written as headers then body waits
    for the client's delayed ACK: every request takes 40 ms.
    """
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
        # Listening now means connections made between here and uvicorn's start wait in
        # the backlog instead of being refused, so "listening on" is true when printed.
        sock.listen(2048)
    except OSError:
        sock.close()
        raise
    return sock


class ThreadedServer:
    """A real uvicorn server on 127.0.0.1 and a free port (or `port`), in a background thread."""

    def __init__(self, app: Starlette, host: str = "127.0.0.1", port: int = 0, limits: ConnectionLimits | None = None):
        self._socket = listen_socket(host, port)
        self.port = self._socket.getsockname()[1]
        self.url = f"http://{host}:{self.port}"
        self.server = AmcServer(config(app, host, self.port, log_level="warning", limits=limits), app)
        self._thread = threading.Thread(target=self._serve, name=f"uvicorn-{self.port}", daemon=True)
        self._loop: asyncio.AbstractEventLoop | None = None

    def _serve(self) -> None:
        asyncio.run(self._main())

    async def _main(self) -> None:
        self._loop = asyncio.get_running_loop()
        await self.server.serve(sockets=[self._socket])

    def start(self, timeout: float = 10.0) -> ThreadedServer:
        self._thread.start()
        deadline = threading.Event()
        for _ in range(int(timeout / 0.005)):
            if self.server.started or not self._thread.is_alive():
                break
            deadline.wait(0.005)
        if not self.server.started:
            raise RuntimeError("the server did not start")
        return self

    def stop(self, timeout: float = 10.0) -> None:
        self.server.drain(self._loop)
        self.server.should_exit = True
        self._thread.join(timeout)
        self._socket.close()

    def __enter__(self) -> ThreadedServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
