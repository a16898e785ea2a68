"""Download names: a conversation's zip is named after its title, safely encoded."""

from __future__ import annotations

import re
import unicodedata
from urllib.parse import quote

NAME_LIMIT = 80


def zip_name(title: str, fallback: str) -> str:
    """A file name for the title: no folders, quotes or control characters; ``fallback``
    when nothing readable is left."""
    text = unicodedata.normalize("NFC", title)
    text = "".join(" " if unicodedata.category(ch)[0] in "CZ" else ch for ch in text)
    text = re.sub(r'[\\/:*?"<>|;,%]+', " ", text)
    text = " ".join(text.split()).strip(". ")[:NAME_LIMIT].strip(". ")
    return (text or fallback) + ".zip"


def attachment_header(filename: str) -> str:
    """Content-Disposition with an ASCII fallback and the UTF-8 name (RFC 6266)."""
    ascii_name = filename.encode("ascii", "replace").decode().replace("?", "_")
    return f"attachment; filename=\"{ascii_name}\"; filename*=UTF-8''{quote(filename, safe='')}"
