"""Names people give and get: conversation titles (the one rule both APIs apply) and
download names (a conversation's zip is named after its title, safely encoded)."""

from __future__ import annotations

import re
import unicodedata
from urllib.parse import quote

NAME_LIMIT = 80
TITLE_LIMIT = 200
# characters that reorder the text around them (a title that reads differently from what it
# holds); other format characters (zero-width joiners of emoji and scripts) are kept
BIDI_CONTROLS = frozenset(
    "\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"
)


class TitleError(ValueError):
    """A title refused: the message says why, for the person."""


def clean_title(raw: object) -> str:
    """A conversation title as a person gave it, with runs of white space made one space;
    raises TitleError for a non-string, a control character (ESC, BEL, NUL …), a
    bidirectional override or isolate, or more than TITLE_LIMIT characters. The same rule
    for planact's API and the LemonAI adapter. May return "" (the caller decides whether an
    empty title means "none" or is refused)."""
    if not isinstance(raw, str):
        raise TitleError("'title' must be a string.")
    title = " ".join(raw.split())
    for ch in title:
        if unicodedata.category(ch) in ("Cc", "Cs") or ch in BIDI_CONTROLS:
            raise TitleError(f"'title' may not contain control characters (U+{ord(ch):04X}).")
    if len(title) > TITLE_LIMIT:
        raise TitleError(f"'title' is longer than {TITLE_LIMIT} characters.")
    return title


def title_from_text(text: str, limit: int) -> str:
    """A title derived from free text (a first message): what :func:`clean_title` would
    refuse is dropped, white space collapsed, at most ``limit`` characters."""
    kept = "".join(
        " " if unicodedata.category(ch) in ("Cc", "Cs") or ch in BIDI_CONTROLS else ch
        for ch in text
    )
    return " ".join(kept.split())[:limit].strip()


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
