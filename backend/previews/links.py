"""Where a preview is reached: its URL, and the token a request to the preview origin names.

Each preview is an origin of its own by default (docs/api.md "Previews"):

- with ``PREVIEW_URL`` unset (`make run`): ``http://<token>.localhost:<PORT+1>/<path>``, a host
  per preview under the preview listener (browsers resolve ``*.localhost`` to loopback);
- with ``PREVIEW_HOST_PATTERN`` (``*.preview.example.com``, a port may follow): the same on the
  deployment's wildcard name, ``{scheme}://<token>.preview.example.com/<path>``, the scheme that
  of ``PREVIEW_URL`` (``http`` when unset);
- with ``PREVIEW_URL`` and no pattern, one shared origin: ``{PREVIEW_URL}/p/<token>/<path>``
  (refused on a server with several users unless ``ALLOW_SHARED_PREVIEW_ORIGIN=1``, warned
  about otherwise). The ``/p/<token>/`` form answers only then: on per-preview hosts no page
  is ever served on an origin shared with another preview.

Tokens are lowercase letters and digits, so that they are valid host names.
"""

from __future__ import annotations

import base64
import logging
import secrets
from collections.abc import Iterable
from dataclasses import dataclass
from urllib.parse import urlsplit

from backend.config import Settings

log = logging.getLogger(__name__)

TOKEN_BYTES = 20  # 160 bits: 32 characters of base32


def new_token() -> str:
    """An unguessable token that is also a valid host name label."""
    return base64.b32encode(secrets.token_bytes(TOKEN_BYTES)).decode("ascii").lower()


@dataclass(frozen=True)
class PreviewLinks:
    base: str  # the preview origin (PREVIEW_URL), without a trailing slash
    pattern: str | None = None  # per-preview hosts, "*.<suffix>[:port]"; None: one origin

    @property
    def shared(self) -> bool:
        """Whether every preview is served on the one origin ``base``."""
        return self.pattern is None

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

    def token_of_host(self, headers: Iterable[tuple[bytes, bytes]]) -> str | None:
        """The token a request's ``Host`` names on per-preview hosts, or None."""
        if self.pattern is None:
            return None
        host = ""
        for key, value in headers:
            if key == b"host":
                host = bytes(value).decode("latin-1").lower()
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
    return PreviewLinks(settings.preview_base(), settings.preview_hosts())


class PreviewConfigError(ValueError):
    """The preview settings would let one user's previewed page reach another's."""


def check_origin(settings: Settings, *, users: int) -> None:
    """Refuse one shared preview origin on a server with several users (unless
    ALLOW_SHARED_PREVIEW_ORIGIN=1); warn about it otherwise. The listener only: a worker
    hosts services but serves no origin."""
    if settings.preview_listen is False or settings.preview_hosts() is not None:
        return
    problem = (
        f"PREVIEW_URL={settings.preview_url} without PREVIEW_HOST_PATTERN serves every preview "
        "on one origin, where one previewed page can read and script the others (their "
        "cookies, storage, service workers)"
    )
    if users > 1 and not settings.allow_shared_preview_origin:
        raise PreviewConfigError(
            f"{problem}, and several users share this server. Set PREVIEW_HOST_PATTERN "
            "(a wildcard host per preview, docs/deploy.md), or ALLOW_SHARED_PREVIEW_ORIGIN=1 "
            "to start anyway."
        )
    log.warning("%s; PREVIEW_HOST_PATTERN gives each preview a host of its own.", problem)
