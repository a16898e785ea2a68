"""Where web_fetch may connect: public http(s) addresses only, unless WEB_ALLOW_HOSTS says so.

The check runs where the connection is made (:class:`GuardedBackend`): the host is resolved
once, every answer is checked, and the socket is opened to a checked address, so a DNS answer
that changes between a check and a connect (rebinding) never reaches a private address.
"""

from __future__ import annotations

import asyncio
import functools
import ipaddress
import socket
import ssl
from collections.abc import Iterable
from typing import Any

import httpcore
import httpx

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address

# cloud metadata services, named for a clear message (both are non-global anyway)
METADATA = {ipaddress.ip_address("169.254.169.254"), ipaddress.ip_address("fd00:ec2::254")}
CGNAT = ipaddress.ip_network("100.64.0.0/10")


class Refused(Exception):
    """The network policy refused a URL or an address; the message is for the model."""


def parse_allow_hosts(value: str) -> frozenset[str]:
    return frozenset(h.strip().lower() for h in value.split(",") if h.strip())


def _embedded(ip: IPAddress) -> IPAddress | None:
    if isinstance(ip, ipaddress.IPv6Address):
        if ip.ipv4_mapped:
            return ip.ipv4_mapped
        if ip.sixtofour:
            return ip.sixtofour
        if ip.teredo:
            return ip.teredo[1]
    return None


def address_problem(ip: IPAddress) -> str | None:
    """Why connecting to ``ip`` is refused (None: it is a public address)."""
    inner = _embedded(ip)
    if inner is not None:
        return address_problem(inner)
    if ip in METADATA:
        return "a cloud metadata address"
    if ip.is_loopback:
        return "a loopback address"
    if ip.is_link_local:
        return "a link-local address"
    if ip.is_multicast:
        return "a multicast address"
    if ip.is_unspecified:
        return "an unspecified address"
    if isinstance(ip, ipaddress.IPv4Address) and ip in CGNAT:
        return "a shared (CGNAT) address"
    if ip.is_reserved:
        return "a reserved address"
    if ip.is_private:
        return "a private address"
    if not ip.is_global:
        return "a reserved address"
    return None


def _literal(host: str) -> IPAddress | None:
    try:
        return ipaddress.ip_address(host.strip("[]").split("%", 1)[0])
    except ValueError:
        return None


class NetworkPolicy:
    def __init__(self, allow_hosts: Iterable[str] = ()) -> None:
        self.allow_hosts = frozenset(h.lower() for h in allow_hosts)

    def allowed_host(self, host: str, port: int) -> bool:
        host = host.lower().strip("[]").rstrip(".")
        return (
            host in self.allow_hosts
            or f"{host}:{port}" in self.allow_hosts
            or (f"[{host}]:{port}" in self.allow_hosts or f"[{host}]" in self.allow_hosts)
        )

    def check_url(self, url: str) -> httpx.URL:
        """The URL-level checks (scheme, host, literal addresses); DNS is checked at connect."""
        try:
            parsed = httpx.URL(url)
        except Exception as exc:
            raise Refused(f"{url!r} is not a valid URL.") from exc
        if parsed.scheme not in ("http", "https"):
            shown = parsed.scheme or "no scheme"
            raise Refused(f"Only http and https URLs are fetched, not {shown} ({url}).")
        if not parsed.host:
            raise Refused(f"{url!r} has no host.")
        port = parsed.port or (443 if parsed.scheme == "https" else 80)
        if self.allowed_host(parsed.host, port):
            return parsed
        ip = _literal(parsed.host)
        if ip is not None:
            problem = address_problem(ip)
            if problem:
                raise Refused(f"{parsed.host} is {problem}; web_fetch does not reach it.")
        elif parsed.host.lower().rstrip(".") in ("localhost", "localhost.localdomain") or (
            parsed.host.lower().rstrip(".").endswith(".localhost")
        ):
            raise Refused(f"{parsed.host} is a loopback name; web_fetch does not reach it.")
        return parsed

    async def resolve(self, host: str, port: int) -> list[str]:
        """The addresses to connect to, each checked (allowed hosts: unchecked)."""
        ip = _literal(host)
        if ip is not None:
            answers = [str(ip)]
        else:
            loop = asyncio.get_running_loop()
            try:
                infos = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM)
            except socket.gaierror as exc:
                raise httpcore.ConnectError(f"{host} could not be resolved ({exc})") from exc
            answers = list(dict.fromkeys(str(info[4][0]) for info in infos))
        if self.allowed_host(host, port):
            return answers
        for answer in answers:
            problem = address_problem(ipaddress.ip_address(answer.split("%", 1)[0]))
            if problem:
                # one bad answer refuses the name: a mixed answer is a rebinding attempt
                raise Refused(
                    f"{host} resolves to {answer}, {problem}; web_fetch does not reach it."
                )
        return answers


class GuardedBackend(httpcore.AsyncNetworkBackend):
    """httpcore's network backend that resolves, checks and connects to a checked address.

    TLS still names the original host (httpcore passes it to ``start_tls`` as SNI and for
    certificate checks); the socket is opened to the IP literal that passed the check.
    """

    def __init__(self, policy: NetworkPolicy) -> None:
        self.policy = policy
        self._inner = httpcore.AnyIOBackend()

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,  # noqa: ASYNC109 (httpcore's signature)
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        answers = await self.policy.resolve(host, port)
        error: Exception | None = None
        for address in answers:
            try:
                return await self._inner.connect_tcp(
                    address, port, timeout, local_address, socket_options
                )
            except (httpcore.ConnectError, httpcore.ConnectTimeout) as exc:
                error = exc
        raise error or httpcore.ConnectError(f"{host} has no address")

    async def connect_unix_socket(
        self,
        path: str,
        timeout: float | None = None,  # noqa: ASYNC109 (httpcore's signature)
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        raise Refused("Unix sockets are not reached by web_fetch.")

    async def sleep(self, seconds: float) -> None:
        await self._inner.sleep(seconds)


@functools.cache
def ssl_context() -> ssl.SSLContext:
    """One TLS context for every fetch (building one loads the CA bundle: ~100 ms)."""
    return httpx.create_ssl_context(trust_env=False)


class GuardedTransport(httpx.AsyncHTTPTransport):
    """An httpx transport whose every connection goes through :class:`GuardedBackend`."""

    def __init__(self, policy: NetworkPolicy) -> None:
        super().__init__(verify=ssl_context(), trust_env=False)
        self._pool = httpcore.AsyncConnectionPool(
            ssl_context=ssl_context(),
            max_connections=20,
            max_keepalive_connections=10,
            keepalive_expiry=5.0,
            network_backend=GuardedBackend(policy),
        )


def guarded_client(policy: NetworkPolicy, timeout: float) -> httpx.AsyncClient:
    return httpx.AsyncClient(
        transport=GuardedTransport(policy),
        follow_redirects=False,  # each hop is checked by the caller
        trust_env=False,  # no proxies from the environment: they would connect for us
        timeout=timeout,
    )
