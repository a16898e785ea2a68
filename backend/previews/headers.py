"""The headers that cross the preview proxy, each way (docs/api.md "Previews").

To the app: the request's headers without hop-by-hop ones (the fixed list and every header
the request's ``Connection`` names), the client's ``Host``, and ``X-Forwarded-*``.
To the browser: the app's headers without hop-by-hop ones, a ``Set-Cookie``'s ``Domain``
dropped (a cookie stays on the preview's own host), and the proxy's own
``Referrer-Policy: same-origin`` in place of the app's: a preview's address is its
credential, and no link or request of the page may carry it to anyone else (its own origin
still gets it: on a shared origin an absolute path of the app is routed by its Referer).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

HOP_BY_HOP = frozenset(
    {
        b"connection",
        b"keep-alive",
        b"proxy-authenticate",
        b"proxy-authorization",
        b"proxy-connection",
        b"te",
        b"trailer",
        b"trailers",
        b"transfer-encoding",
        b"upgrade",
        b"host",
    }
)
# what the proxy says of every answer, whatever the app said
OWN = ((b"referrer-policy", b"same-origin"),)
OWN_NAMES = frozenset(name for name, _ in OWN)
COOKIE_DOMAIN = re.compile(rb";\s*domain\s*=[^;]*", re.IGNORECASE)

Headers = Sequence[tuple[bytes, bytes]]


def named_by_connection(headers: Iterable[tuple[bytes, bytes]]) -> frozenset[bytes]:
    """The header names a message's ``Connection`` lists (hop-by-hop by RFC 9110 7.6.1)."""
    names: set[bytes] = set()
    for key, value in headers:
        if key == b"connection":
            names.update(p.strip().lower() for p in value.split(b",") if p.strip())
    return frozenset(names)


def hop_by_hop(headers: Headers) -> frozenset[bytes]:
    return HOP_BY_HOP | named_by_connection(headers)


def get(headers: Iterable[tuple[bytes, bytes]], name: bytes) -> bytes | None:
    for key, value in headers:
        if key == name:
            return bytes(value)
    return None


def closes(headers: Iterable[tuple[bytes, bytes]]) -> bool:
    return b"close" in (get(headers, b"connection") or b"").lower()


def to_app(
    headers: Headers,
    peer: object,
    *,
    prefix: str = "",
    keep: Iterable[tuple[bytes, bytes]] = (),
) -> list[tuple[bytes, bytes]]:
    """A request's headers for the app: hop-by-hop ones removed (``keep`` added back, e.g. a
    WebSocket's ``Upgrade``), the client's ``Host`` kept, ``X-Forwarded-*`` set by the proxy
    alone (a client's own are dropped). ``prefix``: the path the preview is served under on a
    shared origin (``X-Forwarded-Prefix``)."""
    skip = hop_by_hop(headers)
    out = [(k, v) for k, v in headers if k not in skip and not k.startswith(b"x-forwarded-")]
    host = get(headers, b"host")
    out.append((b"host", host or b"preview"))
    out.extend(keep)
    if isinstance(peer, tuple) and peer:
        out.append((b"x-forwarded-for", str(peer[0]).encode()))
    out.append((b"x-forwarded-proto", b"http"))
    if host:
        out.append((b"x-forwarded-host", host))
    if prefix:
        out.append((b"x-forwarded-prefix", prefix.encode()))
    return out


def to_browser(headers: Headers, *, keep: Iterable[bytes] = ()) -> list[tuple[bytes, bytes]]:
    """An answer's headers for the browser (see the module's docstring). ``keep``: hop-by-hop
    names that stay (a 101's ``Upgrade`` and ``Connection``)."""
    kept = frozenset(keep)
    skip = (hop_by_hop(headers) - kept) | OWN_NAMES
    out: list[tuple[bytes, bytes]] = []
    for key, value in headers:
        if key in skip:
            continue
        if key == b"set-cookie":
            value = COOKIE_DOMAIN.sub(b"", value)
        out.append((key, value))
    out.extend(OWN)
    return out


def own_answer(
    content_type: bytes, length: int, *, close: bool = False
) -> list[tuple[bytes, bytes]]:
    """The headers of an answer of the proxy's own (an error, a static page)."""
    out = [
        (b"content-type", content_type),
        (b"content-length", str(length).encode()),
        (b"x-content-type-options", b"nosniff"),
        *OWN,
    ]
    if close:
        out.append((b"connection", b"close"))
    return out
