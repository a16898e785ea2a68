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
    """Content-Disposition (RFC 6266): the plain name when it is printable ASCII, else an
    ASCII fallback (no quotes, backslashes or control characters) and the UTF-8 name."""
    ascii_name = "".join(ch if " " <= ch <= "~" and ch not in '"\\' else "_" for ch in filename)
    if ascii_name == filename:
        return f'attachment; filename="{filename}"'
    return f"attachment; filename=\"{ascii_name}\"; filename*=UTF-8''{quote(filename, safe='')}"
