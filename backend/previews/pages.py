"""Static HTML files of a workspace on the preview origin: their ``preview_url`` in the file
listing (the conversation's "files" preview, one token for all its pages)."""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

from backend.previews.host import PreviewHost
from backend.previews.links import links_of

PAGE_SUFFIXES = (".html", ".htm")


async def add_preview_urls(
    host: PreviewHost | None, user_id: str, cid: str, entries: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    """``entries`` (the file listing) with ``preview_url`` on each HTML page."""
    pages = [e for e in entries if str(e["filepath"]).lower().endswith(PAGE_SUFFIXES)]
    if host is None or not pages:
        return entries
    row = await host.files_row(user_id, cid)
    base = links_of(host.settings).link(row.token, "/")
    for entry in pages:
        entry["preview_url"] = base + quote(str(entry["filepath"]))
    return entries
