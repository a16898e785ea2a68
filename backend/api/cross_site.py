"""Cross-site defence at the edge, with or without AUTH_TOKEN (docs/security.md).

- `Host` must be a loopback name, the bound host or one of ALLOWED_HOSTS, so a page that
  rebinds its own DNS name to 127.0.0.1 reads nothing: 400.
- A state-changing request (any method but GET, HEAD, OPTIONS) that a browser sends from
  another origin is refused: its `Origin` (or, without one, its `Referer`) must be the
  server's own origin or one of ALLOWED_ORIGINS: 403. `Origin: null` is refused. Requests
  with neither header (curl, scripts) pass: browsers always send `Origin` on cross-origin
  POSTs.

"The server's own origin" is the authority the browser addressed: the `Host` header,
compared host and port with the origin's (its scheme gives the default port), so a reverse
proxy that keeps the `Host` header (and terminates TLS) needs no setting."""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import urlsplit

from starlette.types import ASGIApp, Receive, Scope, Send

from backend.api.errors import error_response

LOOPBACK_NAMES = ("127.0.0.1", "localhost", "::1")
WILDCARD_BINDS = {"", "0.0.0.0", "::", "[::]"}
SAFE_METHODS = {"GET", "HEAD", "OPTIONS"}
DEFAULT_PORTS = {"http": 80, "https": 443}
# answered whatever the Host (container and load-balancer probes); it reveals nothing
HOST_EXEMPT_PATHS = {"/api/health", "/metrics"}  # /metrics checks its own (observe)
# readiness too (a Kubernetes probe's Host is the pod's address): it tells whether the
# database and the runtime work, never anything of a user
HOST_EXEMPT_PATHS |= {"/api/ready"}


@dataclass(frozen=True)
class Authority:
    host: str
    port: int | None


def parse_authority(value: str) -> Authority | None:
    """`name`, `name:port`, `[v6]`, `[v6]:port` (a Host header) -> Authority; None if bad."""
    text = value.strip().lower()
    if not text:
        return None
    port_text = ""
    if text.startswith("["):
        end = text.find("]")
        if end < 0:
            return None
        host, rest = text[1:end], text[end + 1 :]
        if rest:
            if not rest.startswith(":"):
                return None
            port_text = rest[1:]
    elif text.count(":") > 1:  # a bare IPv6 address (settings only)
        host = text
    else:
        host, _, port_text = text.partition(":")
    host = host.rstrip(".")
    if not host or any(c in host for c in "/\\@ \t"):
        return None
    if port_text:
        if not (port_text.isascii() and port_text.isdigit() and len(port_text) <= 5):
            return None
        return Authority(host, int(port_text))
    return Authority(host, None)


@dataclass(frozen=True)
class Origin:
    scheme: str
    host: str
    port: int


def parse_origin(value: str) -> Origin | None:
    """`scheme://host[:port]` (an Origin, or the start of a Referer) -> Origin; None if bad."""
    try:
        parts = urlsplit(value.strip())
        port = parts.port
    except ValueError:
        return None
    scheme = parts.scheme.lower()
    if scheme not in DEFAULT_PORTS or not parts.hostname:
        return None
    return Origin(scheme, parts.hostname.rstrip("."), port or DEFAULT_PORTS[scheme])


class HostPolicy:
    def __init__(self, allowed_hosts: str, bound_host: str) -> None:
        # the loopback names and the bound host always; ALLOWED_HOSTS adds to them
        entries = [*LOOPBACK_NAMES, *(e.strip() for e in allowed_hosts.split(",") if e.strip())]
        if bound_host.strip().lower() not in WILDCARD_BINDS:
            entries.append(bound_host)
        self.any = "*" in entries
        self.allowed: set[Authority] = set()
        for entry in entries:
            if entry != "*" and (auth := parse_authority(entry)) is not None:
                self.allowed.add(auth)

    def allows(self, host: Authority) -> bool:
        if self.any:
            return True
        return Authority(host.host, None) in self.allowed or host in self.allowed


class OriginPolicy:
    def __init__(self, allowed_origins: str) -> None:
        entries = [e.strip() for e in allowed_origins.split(",") if e.strip()]
        self.any = "*" in entries
        self.allowed = {o for e in entries if e != "*" and (o := parse_origin(e)) is not None}

    def allows(self, origin: Origin, own: Authority | None) -> bool:
        if self.any or origin in self.allowed:
            return True
        if own is None:
            return False
        port = own.port if own.port is not None else DEFAULT_PORTS[origin.scheme]
        return origin.host == own.host and origin.port == port


class GuardMiddleware:
    def __init__(
        self, app: ASGIApp, *, allowed_hosts: str, allowed_origins: str, bound_host: str
    ) -> None:
        self.app = app
        self.hosts = HostPolicy(allowed_hosts, bound_host)
        self.origins = OriginPolicy(allowed_origins)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = _headers(scope)
        raw_host = headers.get("host")
        own = parse_authority(raw_host) if raw_host is not None else None
        if (
            raw_host is not None
            and scope["path"] not in HOST_EXEMPT_PATHS
            and (own is None or not self.hosts.allows(own))
        ):
            response = error_response(
                400,
                f"Host {raw_host[:100]!r} is not served here: add it to ALLOWED_HOSTS "
                "(see docs/security.md).",
            )
            await response(scope, receive, send)
            return
        if scope["method"] not in SAFE_METHODS:
            refusal = self._cross_site(headers, own)
            if refusal:
                await error_response(403, refusal)(scope, receive, send)
                return
        await self.app(scope, receive, send)

    def _cross_site(self, headers: dict[str, str], own: Authority | None) -> str | None:
        """Why this state-changing request is refused, or None."""
        if self.origins.any:
            return None
        if "origin" in headers:
            name, value = "Origin", headers["origin"]
        elif "referer" in headers:
            name, value = "Referer", headers["referer"]
        else:
            return None  # not a browser: curl, scripts
        origin = parse_origin(value) if value.strip().lower() != "null" else None
        if origin is not None and self.origins.allows(origin, own):
            return None
        return (
            f"Cross-site request refused: {name} {value[:100]!r} is not this server's origin "
            "nor in ALLOWED_ORIGINS (see docs/security.md)."
        )


def _headers(scope: Scope) -> dict[str, str]:
    """The few headers the guard reads (first occurrence), latin-1 like Starlette."""
    wanted = {b"host", b"origin", b"referer"}
    found: dict[str, str] = {}
    for name, value in scope.get("headers", []):
        if name in wanted and name.decode() not in found:
            found[name.decode()] = value.decode("latin-1")
    return found
