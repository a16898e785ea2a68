"""Browser protections on every response (docs/security.md, "Browser protections").

- The UI (index.html, its assets, and every other response that sets no policy of its own)
  gets :data:`UI_POLICY`: scripts from this origin only, no remote images, no framing.
- Workspace files (downloads, LemonAI's file read) set :data:`DOWNLOAD_HEADERS` themselves:
  a ``sandbox`` policy, so that a downloaded HTML or SVG opened from this origin runs no
  script, and a non-script content type for script files, so that ``script-src 'self'``
  cannot be pointed at a file the agent wrote.
- ``X-Content-Type-Options: nosniff`` everywhere: the browser executes as script only what
  is typed as one (the built UI's ``/assets/*.js``).
"""

from __future__ import annotations

from collections.abc import Awaitable

from starlette.datastructures import MutableHeaders
from starlette.types import ASGIApp, Message, Receive, Scope, Send

UI_POLICY = "; ".join(
    [
        "default-src 'self'",
        "script-src 'self'",
        # the UI itself needs no inline style; the sandboxed HTML preview (an iframe srcdoc,
        # which inherits this policy) keeps the look of the page the agent wrote. CSS can load
        # nothing from elsewhere: images, fonts and connections stay on 'self'.
        "style-src 'self' 'unsafe-inline'",
        "img-src 'self' data: blob:",
        "object-src 'none'",
        "base-uri 'none'",
        "form-action 'self'",
        "frame-ancestors 'none'",
    ]
)

DOWNLOAD_POLICY = "; ".join(
    [
        "sandbox",
        "default-src 'none'",
        "img-src 'self' data:",
        "style-src 'unsafe-inline'",
        "frame-ancestors 'none'",
    ]
)

DOWNLOAD_HEADERS = {
    "Content-Security-Policy": DOWNLOAD_POLICY,
    "X-Content-Type-Options": "nosniff",
}

# the types a browser runs as a script (WHATWG MIME Sniffing, "JavaScript MIME type")
SCRIPT_TYPES = frozenset(
    [
        "application/ecmascript",
        "application/javascript",
        "application/x-ecmascript",
        "application/x-javascript",
        "text/ecmascript",
        "text/javascript",
        *(f"text/javascript1.{n}" for n in range(6)),
        "text/jscript",
        "text/livescript",
        "text/x-ecmascript",
        "text/x-javascript",
    ]
)


def download_media_type(guessed: str | None) -> str:
    """The content type a workspace file is served with: its own, except that a script
    type becomes text (with nosniff, no page can run it as a script)."""
    if not guessed:
        return "application/octet-stream"
    if guessed.split(";", 1)[0].strip().lower() in SCRIPT_TYPES:
        return "text/plain"
    return guessed


class BrowserHeadersMiddleware:
    """Adds the UI policy, ``X-Frame-Options`` and ``nosniff`` to every HTTP response that
    does not set them itself."""

    def __init__(self, app: ASGIApp, frame_origin: str = "") -> None:
        self.app = app
        # previews: the UI's App panel frames the preview origin (docs/api.md "Previews")
        self.policy = f"{UI_POLICY}; frame-src 'self' {frame_origin}" if frame_origin else UI_POLICY

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        # a plain function handing back the server's awaitable: no coroutine of its own for
        # each body message (a run's stream sends hundreds)
        def send_with_headers(message: Message) -> Awaitable[None]:
            if message["type"] == "http.response.start":
                headers = MutableHeaders(scope=message)
                headers.setdefault("Content-Security-Policy", self.policy)
                headers.setdefault("X-Frame-Options", "DENY")
                headers.setdefault("X-Content-Type-Options", "nosniff")
            return send(message)

        await self.app(scope, receive, send_with_headers)
