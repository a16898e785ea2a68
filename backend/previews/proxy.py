"""Finding the preview a request to the preview listener names (docs/api.md "Previews").

On per-preview hosts (the default) the request's ``Host`` names the token and the app sees
the request's own path. On one shared origin (``PREVIEW_URL`` without per-preview hosts)
``/p/<token>/<path>`` does, and an absolute path of the app (``/api/items`` from a page under
``/p/<token>/``) is routed by its ``Referer``. An unknown, forged or expired token, another
user's, a stopped service's, or one whose owner process died (its lease expired: the listing
reads it ``stopped`` too): no preview, 404. The origin sets no cookie and opens no CORS: a
previewed page gets nothing of the person's API credentials.
"""

from __future__ import annotations

import contextlib
import os
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING
from urllib.parse import unquote, urlsplit

from backend.previews.headers import Headers, get
from backend.previews.links import PreviewLinks
from backend.store.rows import StoredPreview
from backend.store.tables import utcnow
from backend.workspace import workspace_path

if TYPE_CHECKING:
    from pathlib import Path

    from backend.store.repo import Store

PREFIX = "/p/"
CACHE_SECONDS = 2.0  # a token's row is looked up again after this
TOUCH_EVERY = 5.0  # seconds between two stored "last request" times of a preview


@dataclass(frozen=True)
class Found:
    """The preview a request reaches, and what of the request its app sees."""

    token: str
    row: StoredPreview
    target: bytes  # the path and query for the app (or the static pages)
    prefix: str  # "/p/<token>" on a shared origin, "" on the preview's own host

    @property
    def path(self) -> str:
        return unquote(self.target.partition(b"?")[0].decode("latin-1"))


def split_token(path: bytes) -> tuple[str, bytes] | None:
    """('<token>', b'/rest') of ``/p/<token>/rest``; None for any other path."""
    if not path.startswith(PREFIX.encode()):
        return None
    token, slash, rest = path[len(PREFIX) :].partition(b"/")
    if not token or not token.isalnum():
        return None
    return token.decode("ascii"), b"/" + rest if slash or rest else b"/"


class PreviewProxy:
    def __init__(self, store: Store, workspace_root: Path, links: PreviewLinks) -> None:
        self.store = store
        self.links = links
        self.workspace_root = workspace_root
        self._rows: dict[str, tuple[float, StoredPreview | None]] = {}
        self._touched: dict[str, float] = {}

    async def _row(self, token: str) -> StoredPreview | None:
        now = time.monotonic()
        cached = self._rows.get(token)
        if cached is not None and now - cached[0] < CACHE_SECONDS:
            row = cached[1]
        else:
            row = await self.store.preview_by_token(token)
            if len(self._rows) > 4096:  # forged tokens must not grow it without end
                self._rows.clear()
            # a stopped service's row is read again each time: a restart keeps its token
            if row is None or row.kind != "service" or row.state in ("starting", "ready"):
                self._rows[token] = (now, row)
            else:
                self._rows.pop(token, None)
        if row is None or row.token_expires < utcnow():
            return None
        if row.kind == "service" and row.state not in ("starting", "ready"):
            return None
        return row

    def _target(self, target: bytes, headers: Headers) -> tuple[str, bytes, str] | None:
        if not self.links.shared:
            token = self.links.token_of_host(headers)
            return (token, target, "") if token else None
        raw_path, mark, query = target.partition(b"?")
        found = split_token(raw_path)
        if found is not None:
            token, rest = found
            return token, rest + mark + query, f"{PREFIX}{token}"
        referer = get(headers, b"referer")
        if referer is not None:
            ref = split_token(urlsplit(referer.decode("latin-1")).path.encode("latin-1"))
            if ref is not None:
                return ref[0], target, f"{PREFIX}{ref[0]}"
        return None

    async def _touch(self, row: StoredPreview) -> None:
        now = time.monotonic()
        if now - self._touched.get(row.id, 0.0) < TOUCH_EVERY:
            return
        self._touched[row.id] = now
        with contextlib.suppress(Exception):
            await self.store.touch_preview(row.id, utcnow())

    async def resolve(self, target: bytes, headers: Headers) -> Found | None:
        """The live preview a request (its target and headers) reaches, its use recorded;
        None when it names none it may reach. Checked on every request, kept-alive ones
        too."""
        named = self._target(target, headers)
        if named is None:
            return None
        row = await self._row(named[0])
        if row is None:
            return None
        await self._touch(row)
        return Found(named[0], row, named[1], named[2])

    async def again(self, found: Found) -> Found | None:
        """``found`` read from the store once more, past the cache (its app did not answer:
        the service may have stopped, or been restarted on another socket); None when the
        preview is no longer live."""
        self._rows.pop(found.token, None)
        row = await self._row(found.token)
        return None if row is None else Found(found.token, row, found.target, found.prefix)

    def workspace(self, row: StoredPreview) -> Path:
        return workspace_path(self.workspace_root, row.user_id, row.conversation_id)

    def trusted(self, row: StoredPreview) -> str | None:
        """The workspace, when the service's socket lies in it (docker): the sandbox can
        write there, so the socket is reached by :mod:`backend.previews.sockets`."""
        root = os.path.realpath(self.workspace(row))
        return root if str(row.socket).startswith(root + "/") else None
