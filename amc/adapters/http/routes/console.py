"""The web console: static files served at /ui, and `/` sent there.

The console is static files shipped in the package `FILES` (index.html, app.css and the
ES modules of the page): nothing is built at install time and nothing is fetched at run
time. Loading them needs no token; every data call the page makes goes to /v1 with the
token a person pasted, exactly as any other client of the API, so a tenant sees in the
console what it sees over the API and nothing more.

Every console response carries a strict Content-Security-Policy: scripts, styles and
fetches only from this origin, images from this origin or from blobs the page made itself
(screenshots it fetched with the token), audio and video only from such blobs (recordings),
no framing, no <base>, and forms only to itself.
The page has no inline script or style, so the policy needs no 'unsafe-inline'.
"""

from __future__ import annotations

from importlib import resources

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import Route

PREFIX = "/ui"
FILES = "amc.adapters.http.console"  # the package that ships them

CONTENT_SECURITY_POLICY = "; ".join(
    [
        "default-src 'self'",
        "script-src 'self'",
        "style-src 'self'",
        "img-src 'self' blob:",
        "media-src blob:",
        "connect-src 'self'",
        "frame-ancestors 'none'",
        "base-uri 'none'",
        "form-action 'self'",
    ]
)

HEADERS = {
    "Content-Security-Policy": CONTENT_SECURITY_POLICY,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    # The files change with the installed amc: revalidate rather than run a stale page.
    "Cache-Control": "no-cache",
}

TYPES = {
    ".html": "text/html; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
}


def _files() -> dict[str, tuple[bytes, str]]:
    """Every file of the console by name, with its media type (read once: they are small)."""
    found = {}
    for entry in resources.files(FILES).iterdir():
        suffix = "." + entry.name.rsplit(".", 1)[-1] if "." in entry.name else ""
        if entry.is_file() and suffix in TYPES:
            found[entry.name] = (entry.read_bytes(), TYPES[suffix])
    return found


class Console:
    """The console's routes (outside /v1): `/` redirects to /ui, /ui is the page, /ui/<file> its files."""

    def __init__(self) -> None:
        self.files = _files()

    async def root(self, request: Request) -> Response:
        return RedirectResponse(PREFIX, status_code=302, headers=HEADERS)

    async def page(self, request: Request) -> Response:
        return self._serve("index.html")

    async def file(self, request: Request) -> Response:
        return self._serve(request.path_params["name"])

    def _serve(self, name: str) -> Response:
        found = self.files.get(name)
        if found is None:
            return Response("no such console file\n", status_code=404, media_type="text/plain", headers=HEADERS)
        body, media_type = found
        return Response(body, media_type=media_type, headers=HEADERS)

    def routes(self) -> list[Route]:
        return [
            Route("/", self.root, methods=["GET", "HEAD"]),
            Route(PREFIX, self.page, methods=["GET", "HEAD"]),
            Route(PREFIX + "/", self.page, methods=["GET", "HEAD"]),
            Route(PREFIX + "/{name}", self.file, methods=["GET", "HEAD"]),
        ]
