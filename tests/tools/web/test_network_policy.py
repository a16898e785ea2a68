"""The SSRF table: with WEB_ALLOW_HOSTS unset, no loopback, private, link-local, metadata or
non-http(s) URL is fetched, directly, through DNS or through a redirect; the loopback site
sees no request."""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from backend.tools.web import FetchConfig, NetworkPolicy, Refused, WebFetch, address_problem
from backend.tools.web.policy import guarded_client
from tests.tools.web.site import Site

REAL_GETADDRINFO = socket.getaddrinfo


@pytest.fixture
def resolver(monkeypatch: pytest.MonkeyPatch) -> dict[str, list[str]]:
    """Names answered by a patched resolver at the socket boundary: name -> addresses."""
    names: dict[str, list[str]] = {}

    def getaddrinfo(host: Any, port: Any, *args: Any, **kw: Any) -> Any:
        key = host.decode() if isinstance(host, bytes) else host
        if key in names:
            return [
                (
                    socket.AF_INET6 if ":" in a else socket.AF_INET,
                    socket.SOCK_STREAM,
                    6,
                    "",
                    (a, int(port or 0), 0, 0) if ":" in a else (a, int(port or 0)),
                )
                for a in names[key]
            ]
        return REAL_GETADDRINFO(host, port, *args, **kw)

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
    return names


@pytest.fixture
def redirector() -> Iterator[Site]:
    """A second site, the only allowed host:port, that redirects wherever a test says."""
    server = Site().start()
    yield server
    server.stop()


def unrestricted() -> WebFetch:
    return WebFetch(FetchConfig(render="never", timeout=5.0))


@pytest.mark.parametrize(
    ("url", "words"),
    [
        ("http://127.0.0.1:{port}/", "127.0.0.1 is a loopback address"),
        ("http://localhost:{port}/", "localhost is a loopback name"),
        ("http://LOCALHOST.:{port}/", "is a loopback name"),
        ("http://[::1]:{port}/", "::1 is a loopback address"),
        ("http://[::ffff:127.0.0.1]:{port}/", "is a loopback address"),
        ("http://0.0.0.0:{port}/", "an unspecified address"),
        ("http://10.1.2.3:{port}/", "10.1.2.3 is a private address"),
        ("http://192.168.1.20:{port}/", "192.168.1.20 is a private address"),
        ("http://172.16.0.9/", "a private address"),
        ("http://100.64.0.1/", "a shared (CGNAT) address"),
        ("http://169.254.169.254/latest/meta-data/", "a cloud metadata address"),
        ("http://[fd00:ec2::254]/", "a cloud metadata address"),
        ("http://[fe80::1]/", "a link-local address"),
        ("http://224.0.0.1/", "a multicast address"),
        ("file:///etc/passwd", "Only http and https URLs are fetched, not file"),
        ("ftp://127.0.0.1:{port}/", "Only http and https URLs are fetched, not ftp"),
        ("gopher://127.0.0.1:{port}/_x", "not gopher"),
        ("127.0.0.1:{port}/", "Only http and https"),
    ],
)
async def test_refused_urls_are_clear_failures_and_nothing_is_fetched(
    site: Site, url: str, words: str
) -> None:
    result = await unrestricted()(url.format(port=site.port))
    assert result.status == "failure"
    assert result.content.startswith("Refused: ")
    assert words in result.content
    assert site.paths == []


async def test_a_name_whose_dns_answer_is_loopback_is_refused(
    site: Site, resolver: dict[str, list[str]]
) -> None:
    resolver["intranet.test"] = ["127.0.0.1"]
    result = await unrestricted()(f"http://intranet.test:{site.port}/")
    assert result.status == "failure"
    assert "intranet.test resolves to 127.0.0.1, a loopback address" in result.content
    assert site.paths == []


async def test_one_private_answer_among_public_ones_refuses_the_name(
    site: Site, resolver: dict[str, list[str]]
) -> None:
    resolver["mixed.test"] = ["93.184.216.34", "127.0.0.1"]
    result = await unrestricted()(f"http://mixed.test:{site.port}/")
    assert result.status == "failure"
    assert "resolves to 127.0.0.1" in result.content
    assert site.paths == []


async def test_a_number_that_resolves_to_loopback_is_refused(site: Site) -> None:
    # 2130706433 == 127.0.0.1: not an address literal to the URL, but the resolver's answer
    result = await unrestricted()(f"http://2130706433:{site.port}/")
    assert result.status == "failure"
    assert "a loopback address" in result.content
    assert site.paths == []


async def test_the_transport_itself_refuses_what_the_resolver_answers(
    site: Site, resolver: dict[str, list[str]]
) -> None:
    # below the URL checks: any request through the guarded client (the rendered page's
    # requests use it too) is refused at connect time
    resolver["rebind.test"] = ["127.0.0.1"]
    async with guarded_client(NetworkPolicy(), 5.0) as client:
        with pytest.raises(Refused, match=r"resolves to 127\.0\.0\.1"):
            await client.get(f"http://rebind.test:{site.port}/")
        with pytest.raises(Refused, match="a loopback address"):
            await client.get(f"{site.url}/")
    assert site.paths == []


@pytest.mark.parametrize(
    ("target", "words"),
    [
        ("http://127.0.0.1:{port}/", "127.0.0.1 is a loopback address"),
        ("http://169.254.169.254/latest/meta-data/iam", "a cloud metadata address"),
        ("http://[::1]:{port}/", "::1 is a loopback address"),
        ("file:///etc/passwd", "not file"),
    ],
)
async def test_a_redirect_to_a_refused_address_is_refused(
    site: Site, redirector: Site, target: str, words: str
) -> None:
    redirector.redirect_to["/go"] = target.format(port=site.port)
    fetch = WebFetch(
        FetchConfig(render="never", allow_hosts=frozenset({f"127.0.0.1:{redirector.port}"}))
    )
    result = await fetch(f"{redirector.url}/go")
    assert result.status == "failure"
    assert f"{redirector.url}/go redirects to" in result.content
    assert words in result.content
    assert redirector.paths == ["/go"]
    assert site.paths == []


async def test_an_allowed_host_port_does_not_open_other_ports(site: Site, redirector: Site) -> None:
    fetch = WebFetch(
        FetchConfig(render="never", allow_hosts=frozenset({f"127.0.0.1:{redirector.port}"}))
    )
    assert (await fetch(f"{redirector.url}/")).ok
    assert (await fetch(f"{site.url}/")).status == "failure"
    assert site.paths == []


async def test_an_allowed_host_name_opens_every_port(
    site: Site, resolver: dict[str, list[str]]
) -> None:
    resolver["dev.test"] = ["127.0.0.1"]
    fetch = WebFetch(FetchConfig(render="never", allow_hosts=frozenset({"dev.test"})))
    result = await fetch(f"http://dev.test:{site.port}/")
    assert result.ok, result.content
    assert site.nonce in result.content


@pytest.mark.parametrize(
    ("address", "problem"),
    [
        ("8.8.8.8", None),
        ("2606:4700:4700::1111", None),
        ("127.8.9.10", "a loopback address"),
        ("169.254.1.1", "a link-local address"),
        ("100.127.255.254", "a shared (CGNAT) address"),
        ("239.255.255.250", "a multicast address"),
        ("240.0.0.1", "a reserved address"),
        ("192.0.2.1", "a private address"),
        ("fc00::1", "a private address"),
        ("2002:7f00:1::", "a loopback address"),  # 6to4 around 127.0.0.1
        ("::ffff:10.0.0.1", "a private address"),
    ],
)
def test_address_classes(address: str, problem: str | None) -> None:
    assert address_problem(ipaddress.ip_address(address)) == problem


async def test_the_guarded_client_ignores_proxy_variables(
    monkeypatch: pytest.MonkeyPatch, site: Site
) -> None:
    # a proxy from the environment would make the connection for us, unchecked
    monkeypatch.setenv("HTTP_PROXY", site.url)
    monkeypatch.setenv("ALL_PROXY", site.url)
    async with guarded_client(NetworkPolicy(), 5.0) as client:
        with pytest.raises(httpx.ConnectError):
            await client.get("http://192.0.2.1.nip.invalid/")
    assert site.paths == []
