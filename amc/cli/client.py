"""A small synchronous client for the caller's side of the protocol (specs/protocol.md Parts A and B).

The CLI's commands, `amc up` and `amc demo` reach the server only through this module.
Every call returns the decoded JSON or raises exactly one `ApiError`:

- `Unreachable`: no HTTP answer at all (connection refused, a timeout, a cut connection,
  a URL that is not http(s)). Nothing can be said about whether the request took effect.
- `Refused`: the server answered with a problem document; `status`, `code` (the protocol's
  machine-readable code, e.g. `task_terminal`) and `detail` say why. A reply that is not a
  problem (a proxy's HTML page, another program on the port) gets the code `http_<status>`.

Both carry a one-line `message` meant for people; the CLI prints it and exits with the code
`amc.cli.app` assigns to the error, so scripts can tell "down" from "no" from "not there".

Given several URLs (``http://a:8000,http://b:8000``: servers sharing one store), a call
follows the leader by the rules of `amc.leader`, which the Host Agent follows too
(specs/protocol.md "High availability", HA/s5 to HA/s8):

- a URL that refused the connection, or a standby (503 `not_leader`), is passed over and the
  request goes to the next URL at once: it did nothing there, so this is safe for any request;
- a request that may have been delivered (a timeout or a cut connection after sending) goes
  on to the next URL only if it is safe to repeat: a read, a cancel (CANCEL-IDEMPOTENT) or a
  submit with an idempotency key (SUBMIT-IDEMPOTENT). A message (steer, pause, resume,
  follow-up) or a submit without a key is never resent: the call ends `Unreachable`, saying
  it may or may not have taken effect;
- while standbys answer (a leader is being elected), rounds are repeated after a pause
  (backoff, or the standbys' `Retry-After`, at most 5 s) for up to `timeout` seconds; a
  round in which no server answered at all ends the call at once, as with one URL.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from amc.leader import Endpoints, is_standby, never_sent, retry_after

if TYPE_CHECKING:
    from collections.abc import Callable

    import httpx

    from amc.cli.events import LiveEvents, ServerEvent

DEFAULT_URL = "http://127.0.0.1:8000"
TOKENS_FILE = "tokens.json"  # inside the data directory, written by `amc serve` on its first start
SERVER_FILE = "server.json"  # beside the tokens file while a server runs: its URL and process id
CONNECT_SECONDS = 5.0  # a connection not made in this long counts as refused: the next server is tried
DOWNLOAD_CHUNK_BYTES = 256 * 1024  # what a download holds in memory at a time

JsonObject = dict[str, Any]  # a decoded JSON object: every answer of the caller endpoints is one


class ByteSink(Protocol):
    """Where a download's bytes go, chunk by chunk: a binary file, a hasher, a printer."""

    def write(self, chunk: bytes, /) -> object: ...


class ApiError(Exception):
    """A call that did not succeed; `message` is one line for people."""

    def __init__(self, message: str):
        super().__init__(message)
        self.message = message


class Unreachable(ApiError):
    """No answer from the server: it is down, the URL is wrong, or the network cut the call."""


class Refused(ApiError):
    """The server answered with an error (a problem+json document)."""

    def __init__(self, status: int, code: str, detail: str, title: str = ""):
        super().__init__(f"{detail} ({status} {code})" if detail else f"{status} {code}")
        self.status = status
        self.code = code
        self.detail = detail
        self.title = title or code.replace("_", " ")


class ApiClient:
    """The caller endpoints of one server, with one bearer token (client or admin role).

    Args:
        url: the server's base URL, e.g. ``http://127.0.0.1:8000``, or several, comma-separated,
            of servers sharing one store: calls follow the leader among them (see above).
        token: the bearer token; sent in a header, never printed.
        timeout: seconds one request may take before it counts as unanswered; also how long
            a call waits for a leader while only standbys answer.
    """

    def __init__(self, url: str, token: str, *, timeout: float = 10.0):
        import httpx  # here, not at the top: `amc --help` imports this module and should stay instant

        self.endpoints = Endpoints([url])
        self.timeout = timeout
        self._token = token
        # Every connect and every read has a bound (BOUNDED/s2): a server that takes no
        # connection in CONNECT_SECONDS counts as refused, and the next one is tried.
        bounds = httpx.Timeout(timeout, connect=min(timeout, CONNECT_SECONDS))
        self._http = httpx.Client(timeout=bounds, headers={"Authorization": f"Bearer {token}"})

    @property
    def url(self) -> str:
        """The URL in use: the one that answered as the leader last."""
        return self.endpoints.current

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> ApiClient:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # -- endpoints -----------------------------------------------------------------------

    def health(self) -> JsonObject:
        return self._call("GET", "/v1/health")[1]

    def submit(self, body: JsonObject) -> tuple[JsonObject, bool]:
        """The task, and whether it was created (201) rather than found by idempotency key (200)."""
        status, task = self._call("POST", "/v1/tasks", body, repeatable=bool(body.get("idempotency_key")))
        return task, status == 201

    def task(self, task_id: str) -> JsonObject:
        return self._call("GET", f"/v1/tasks/{_segment(task_id)}")[1]

    def tasks(self, status: str | None = None, limit: int = 100, after: str | None = None) -> JsonObject:
        """One page: ``{"tasks": [...], "next": cursor or None}``, oldest first."""
        params: dict[str, Any] = {"limit": limit}
        if status:
            params["status"] = status
        if after:
            params["after"] = after
        return self._call("GET", "/v1/tasks", query=params)[1]

    def all_tasks(self, status: str | None = None, limit: int = 1000, after: str | None = None) -> JsonObject:
        """Up to `limit` tasks, following `next` across pages; same shape as `tasks`."""
        found: list[JsonObject] = []
        cursor = after
        while True:
            page = self.tasks(status, min(1000, limit - len(found)), cursor)
            found.extend(page["tasks"])
            cursor = page["next"]
            if cursor is None or len(found) >= limit:
                return {"tasks": found, "next": cursor}

    def history(self, task_id: str) -> JsonObject:
        return self._call("GET", f"/v1/tasks/{_segment(task_id)}/history")[1]

    def cancel(self, task_id: str, reason: str | None = None) -> tuple[JsonObject, bool]:
        """The task, and whether the cancellation is pending (202: the task is still running)."""
        body = {} if reason is None else {"reason": reason}
        status, task = self._call("POST", f"/v1/tasks/{_segment(task_id)}/cancel", body, repeatable=True)
        return task, status == 202

    def post_message(
        self, task_id: str, intent: str, text: str | None = None, data: JsonObject | None = None
    ) -> JsonObject:
        """Send an intent (steer, follow_up, pause, resume) to a task; the message as posted."""
        body: dict[str, Any] = {"intent": intent}
        if text is not None:
            body["text"] = text
        if data is not None:
            body["data"] = data
        return self._call("POST", f"/v1/tasks/{_segment(task_id)}/messages", body)[1]

    def messages(self, task_id: str) -> JsonObject:
        """``{"messages": [...]}``: every message of the task, in posting order."""
        return self._call("GET", f"/v1/tasks/{_segment(task_id)}/messages")[1]

    def artifacts(self, task_id: str) -> list[JsonObject]:
        """Every artifact of the task (specs/protocol.md Part C), every attempt's, in upload order."""
        listed: list[JsonObject] = self._call("GET", f"/v1/tasks/{_segment(task_id)}/artifacts")[1]["artifacts"]
        return listed

    def download(
        self, task_id: str, artifact_id: str, sink: ByteSink, on_chunk: Callable[[int], object] | None = None
    ) -> int:
        """Stream one artifact's bytes into `sink`, chunk by chunk (never the whole body in
        memory), from the URL that last answered as the leader (a listing or a read of the
        task comes first); the number of bytes written. `on_chunk(n)` is told each chunk's size."""
        import httpx

        url = self.url
        path = f"/v1/tasks/{_segment(task_id)}/artifacts/{_segment(artifact_id)}"
        written = 0
        try:
            with self._http.stream("GET", url + path) as response:
                if response.status_code >= 400:
                    response.read()
                    raise _refusal(response)
                for chunk in response.iter_bytes(DOWNLOAD_CHUNK_BYTES):
                    sink.write(chunk)
                    written += len(chunk)
                    if on_chunk is not None:
                        on_chunk(len(chunk))
        except (httpx.HTTPError, httpx.InvalidURL) as error:
            raise Unreachable(f"the download of {artifact_id} was cut: {_no_answer(url, error)}") from None
        return written

    def upload_input(self, path: Path) -> tuple[JsonObject, bool]:
        """Upload the file at `path` as an input of the caller's tenant (specs/protocol.md
        Part F), streamed from the file under its sha256: the input, and whether it is new
        (201) rather than had already (200). Safe to repeat: the same bytes are the same input."""
        import hashlib

        import httpx

        with open(path, "rb") as file:
            digest = hashlib.file_digest(file, "sha256").hexdigest()
        url = self.url
        try:
            with open(path, "rb") as file:
                response = self._http.put(
                    f"{url}/v1/inputs/{digest}",
                    content=iter(lambda: file.read(DOWNLOAD_CHUNK_BYTES), b""),
                    headers={"Content-Length": str(path.stat().st_size)},
                    timeout=max(self.timeout, 600.0),
                )
        except (httpx.HTTPError, httpx.InvalidURL) as error:
            raise Unreachable(f"the upload of {path} was cut: {_no_answer(url, error)}") from None
        status, found = _answer(url, response)
        return found, status == 201

    def inputs(self) -> list[JsonObject]:
        listed: list[JsonObject] = self._call("GET", "/v1/inputs")[1]["inputs"]
        return listed

    def hosts(self) -> JsonObject:
        return self._call("GET", "/v1/hosts")[1]

    def host(self, host_id: str) -> JsonObject:
        return self._call("GET", f"/v1/hosts/{_segment(host_id)}")[1]

    def live_events(self, on_event: Callable[[ServerEvent], None]) -> LiveEvents:
        """A reader of the server's event stream (not started; see `amc.cli.events`)."""
        from amc.cli.events import LiveEvents

        return LiveEvents(self.endpoints.urls, self._token, on_event, first=self.url)

    # -- plumbing ------------------------------------------------------------------------

    def _call(
        self,
        verb: str,
        path: str,
        body: Any = None,
        query: JsonObject | None = None,
        *,
        repeatable: bool | None = None,
        wait: float = 0.0,
    ) -> tuple[int, JsonObject]:
        """One request, to the leader among the URLs; `repeatable` (default: a GET) says whether
        it may be sent again after it was perhaps delivered. `wait` is how long the server may
        hold the request (a long poll's `wait_seconds`): the read may take that much longer
        than `timeout` (BOUNDED/s2)."""
        import httpx

        repeatable = verb == "GET" if repeatable is None else repeatable
        give_up_at = time.monotonic() + self.timeout
        bounds = httpx.Timeout(self.timeout + wait, connect=min(self.timeout, CONNECT_SECONDS))
        while True:
            time.sleep(self.endpoints.wait_seconds())
            missed: list[str] = []  # why each URL of this round was passed over
            standbys, pause_asked = 0, 0.0
            for url in self.endpoints.round():
                try:
                    response = self._http.request(verb, url + path, json=body, params=query, timeout=bounds)
                except (httpx.HTTPError, httpx.InvalidURL) as error:
                    self.endpoints.passed_over(url)
                    if not (never_sent(error) or repeatable):
                        raise Unreachable(
                            f"{_no_answer(url, error)}; the request may or may not have taken effect: "
                            "look before sending it again"
                        ) from None
                    missed.append(_no_answer(url, error))
                    continue
                if is_standby(response.status_code, response.content):
                    self.endpoints.passed_over(url)
                    standbys += 1
                    pause_asked = max(pause_asked, retry_after(response.headers.get("Retry-After")) or 0.0)
                    missed.append(f"the server at {url} is a standby, not the leader")
                    continue
                self.endpoints.answered(url)
                return _answer(url, response)
            pause = self.endpoints.no_leader(pause_asked)
            if not standbys or time.monotonic() + pause > give_up_at:
                raise Unreachable("; ".join(missed) if len(missed) == 1 else "no leader: " + "; ".join(missed))


def _no_answer(url: str, error: Exception) -> str:
    """Why `url` gave no answer, in one line."""
    import httpx

    if isinstance(error, httpx.UnsupportedProtocol):
        return f"{url} is not an http:// or https:// URL"
    if isinstance(error, httpx.TimeoutException):
        return f"the server at {url} did not answer in time"
    if isinstance(error, httpx.ConnectError):
        return f"cannot connect to the server at {url} ({_reason(error)})"
    return f"no answer from the server at {url} ({_reason(error)})"


def _answer(url: str, response: httpx.Response) -> tuple[int, JsonObject]:
    """The status and decoded JSON of an answer, or the `Refused` it amounts to."""
    if response.status_code >= 400:
        raise _refusal(response)
    try:
        return response.status_code, response.json()
    except ValueError:
        raise Refused(
            response.status_code,
            "not_amc",
            f"the server at {url} answered something that is not JSON; is it an amc server?",
        ) from None


def _segment(value: str) -> str:
    """A path segment with its reserved characters escaped, so an id can never change the route."""
    from urllib.parse import quote

    return quote(value, safe="")


def _reason(error: Exception) -> str:
    text = str(error).strip()
    if "Connection refused" in text or "Errno 111" in text:
        return "connection refused"
    return text.splitlines()[-1] if text else type(error).__name__


def _refusal(response: httpx.Response) -> Refused:
    try:
        problem = response.json()
    except ValueError:
        problem = None
    if isinstance(problem, dict) and isinstance(problem.get("code"), str):
        title = str(problem.get("title") or "")
        return Refused(response.status_code, problem["code"], str(problem.get("detail") or title), title)
    return Refused(
        response.status_code,
        f"http_{response.status_code}",
        f"{response.reason_phrase or 'error'} (not a problem document; is this an amc server?)",
    )


# -- the local tokens file ------------------------------------------------------------------


def read_tokens_file(path: Path) -> list[JsonObject]:
    """The entries of a tokens file (specs/protocol.md format); ApiError if it cannot be read."""
    try:
        entries = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ApiError(f"no tokens file at {path}") from None
    except (OSError, ValueError) as error:
        raise ApiError(f"cannot read the tokens file {path}: {type(error).__name__}") from None
    if not isinstance(entries, list) or not all(isinstance(e, dict) for e in entries):
        raise ApiError(f"{path} is not a tokens file (a JSON list of token objects)")
    return entries


def token_for(entries: list[JsonObject], *roles: str) -> JsonObject | None:
    """The first entry whose role is `roles[0]`, else `roles[1]`, ...; None if there is none."""
    for role in roles:
        for entry in entries:
            if entry.get("role") == role and isinstance(entry.get("token"), str):
                return entry
    return None


def local_token(data_dir: str | os.PathLike[str]) -> str:
    """The caller token of a local stack: the tokens file's client token, else its admin token.

    The client token comes first: it is the least privilege that can do everything the task
    commands do (on its tenant, `default` for a file `amc serve` wrote).
    """
    path = Path(data_dir) / TOKENS_FILE
    entry = token_for(read_tokens_file(path), "client", "admin")
    if entry is None:
        raise ApiError(f"{path} has no client or admin token")
    token: str = entry["token"]  # a string: token_for picks only such entries
    return token


# -- where the local server listens ---------------------------------------------------------


def write_server_file(directory: Path, url: str) -> Path | None:
    """Record where this process serves, beside its tokens file; None if the directory is not writable."""
    path = directory / SERVER_FILE
    try:
        temporary = path.with_name(f".{SERVER_FILE}.{os.getpid()}")
        temporary.write_text(json.dumps({"url": url, "pid": os.getpid()}) + "\n", encoding="utf-8")
        os.replace(temporary, path)
    except OSError:
        return None
    return path


def remove_server_file(path: Path) -> None:
    """Forget the record, if it is still this process's (a newer server may have replaced it)."""
    try:
        if json.loads(path.read_text(encoding="utf-8")).get("pid") == os.getpid():
            path.unlink()
    except (OSError, ValueError, AttributeError):
        pass


def read_server_file(directory: str | os.PathLike[str]) -> tuple[str, int] | None:
    """The URL and process id a server recorded in `directory`; None without a readable record."""
    try:
        record = json.loads((Path(directory) / SERVER_FILE).read_text(encoding="utf-8"))
        url, pid = record["url"], record["pid"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if not isinstance(url, str) or not isinstance(pid, int):
        return None
    return url, pid


def local_url(data_dir: str | os.PathLike[str]) -> str | None:
    """The URL of the server whose tokens file is in `data_dir`, if that server is still running."""
    record = read_server_file(data_dir)
    if record is None or not _alive(record[1]):
        return None
    return record[0]


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # it exists, under another user
        return True
    return True
