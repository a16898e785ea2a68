"""Where a preview is reached: its URL, and the token a request to the preview origin names.

Two forms (docs/api.md "Previews"):

- on ``PREVIEW_URL`` (default ``http://127.0.0.1:<PORT+1>``): ``{PREVIEW_URL}/p/<token>/<path>``;
- with ``PREVIEW_HOST_PATTERN`` (``*.preview.example.com``, a port may follow): each preview
  on a host of its own, ``{scheme}://<token>.preview.example.com/<path>``, the scheme that of
  ``PREVIEW_URL`` (``http`` when unset). Every preview is then an origin of its own: one
  previewed page cannot read another's storage either. The ``/p/<token>/`` form still
  answers on the listener.

Tokens are lowercase letters and digits, so that they are valid host names.
"""

from __future__ import annotations

import base64
import secrets
from dataclasses import dataclass
from urllib.parse import urlsplit

from starlette.types import Scope

from backend.config import Settings

TOKEN_BYTES = 20  # 160 bits: 32 characters of base32


def new_token() -> str:
    """An unguessable token that is also a valid host name label."""
    return base64.b32encode(secrets.token_bytes(TOKEN_BYTES)).decode("ascii").lower()


@dataclass(frozen=True)
class PreviewLinks:
    base: str  # the preview origin (PREVIEW_URL), without a trailing slash
    pattern: str | None = None  # PREVIEW_HOST_PATTERN (checked by Settings)

    @property
    def _suffix(self) -> str:
        assert self.pattern is not None
        return self.pattern[1:]  # ".preview.example.com[:port]"

    @property
    def _scheme(self) -> str:
        return urlsplit(self.base).scheme or "http"

    def link(self, token: str, path: str = "/") -> str:
        """The URL of ``path`` (starting with /) of the preview ``token`` names."""
        if self.pattern is not None:
            return f"{self._scheme}://{token}{self._suffix}{path}"
        return f"{self.base}/p/{token}{path}"

    def frame_source(self) -> str:
        """What the UI's Content-Security-Policy lets it frame: the preview origin(s)."""
        if self.pattern is not None:
            return f"{self._scheme}://*{self._suffix}"
        parts = urlsplit(self.base)
        return f"{parts.scheme}://{parts.netloc}"

    def token_of_host(self, scope: Scope) -> str | None:
        """The token a request's ``Host`` names under PREVIEW_HOST_PATTERN, or None."""
        if self.pattern is None:
            return None
        host = ""
        for key, value in scope.get("headers", []):
            if key == b"host":
                host = value.decode("latin-1").lower()
                break
        suffix = self._suffix
        if ":" not in suffix and ":" in host:  # no port in the pattern: any port
            host = host.rsplit(":", 1)[0]
        if not host.endswith(suffix):
            return None
        token = host[: -len(suffix)]
        return token if token and "." not in token else None


def links_of(settings: Settings) -> PreviewLinks:
    """The preview links of this server's settings."""
    return PreviewLinks(settings.preview_base(), settings.preview_host_pattern)
