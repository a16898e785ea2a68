"""web_fetch against a small site on 127.0.0.1 (allowed through WEB_ALLOW_HOSTS)."""

from __future__ import annotations

from pathlib import Path

from backend.tools.web import FetchConfig, WebFetch, offered, web_fetch
from tests.support.settings import make_settings
from tests.tools.web.site import Site


def fetcher(site: Site, **kw: object) -> WebFetch:
    values: dict[str, object] = {
        "allow_hosts": frozenset({f"127.0.0.1:{site.port}"}),
        "render": "never",
        "timeout": 10.0,
    }
    values.update(kw)
    return WebFetch(FetchConfig(**values))  # type: ignore[arg-type]


async def test_a_page_comes_back_as_markdown_with_title_and_links(site: Site) -> None:
    result = await fetcher(site)(site.url + "/")
    assert result.ok, result.content
    data = result.data
    assert data["title"] == "Nonce Page"
    assert site.nonce in data["markdown"]
    assert site.nonce in result.content
    assert result.content.startswith(f"# Nonce Page\n{site.url}/")
    urls = [link["url"] for link in data["links"]]
    assert urls == [f"{site.url}/about", "https://example.org/docs"]  # absolute, no mailto
    assert data["links"][0]["text"] == "About"
    assert data["kind"] == "html"
    assert data["rendered"] is False
    # without rendering the script-built section is not there
    assert site.script_nonce not in data["markdown"]


async def test_a_redirect_chain_is_followed_to_the_page(site: Site) -> None:
    result = await fetcher(site)(site.url + "/r1")
    assert result.ok, result.content
    assert result.data["url"] == site.url + "/"
    assert result.data["redirects"] == [site.url + "/r1", site.url + "/r2", site.url + "/r3"]
    assert site.nonce in result.data["markdown"]


async def test_a_redirect_loop_is_a_failure(site: Site) -> None:
    result = await fetcher(site)(site.url + "/loop-a")
    assert result.status == "failure"
    assert "redirects in a loop" in result.content
    assert site.paths == ["/loop-a", "/loop-b"]


async def test_too_many_redirects_is_a_failure(site: Site) -> None:
    result = await fetcher(site)(site.url + "/chain0")
    assert result.status == "failure"
    assert "redirects more than 5 times" in result.content
    assert len(site.paths) == 6


async def test_a_slow_page_fails_within_web_timeout(site: Site) -> None:
    result = await fetcher(site, timeout=0.5)(site.url + "/slow")
    assert result.status == "failure"
    assert "no complete answer within 0.5 s (WEB_TIMEOUT)" in result.content


async def test_a_huge_page_is_read_up_to_web_max_bytes(site: Site) -> None:
    result = await fetcher(site, max_bytes=200_000)(site.url + "/huge")
    assert result.ok, result.content
    assert result.data["truncated"] is True
    assert "larger than 200000 bytes; only that much was read" in result.content
    # the site was stopped long before its 100 MB: the client hung up
    assert site.huge_sent < 50 * 2**20


async def test_binary_content_is_refused_clearly(site: Site) -> None:
    for path, ctype in (("/bin", "application/octet-stream"), ("/image.png", "image/png")):
        result = await fetcher(site)(site.url + path)
        assert result.status == "failure", path
        assert f"it is binary content ({ctype}), which is not read" in result.content


async def test_a_pdf_is_read_as_text_with_its_title(site: Site) -> None:
    result = await fetcher(site)(site.url + "/doc.pdf")
    assert result.ok, result.content
    assert result.data["kind"] == "pdf"
    assert result.data["title"] == "Nonce Report"
    assert f"PDF nonce {site.nonce}" in result.data["markdown"]


async def test_a_pdf_beyond_web_max_bytes_is_a_failure(site: Site) -> None:
    result = await fetcher(site, max_bytes=100)(site.url + "/doc.pdf")
    assert result.status == "failure"
    assert "the PDF is larger than WEB_MAX_BYTES" in result.content


async def test_plain_text_comes_back_as_is(site: Site) -> None:
    result = await fetcher(site)(site.url + "/notes.txt")
    assert result.ok
    assert result.data["kind"] == "text"
    assert result.data["markdown"] == f"plain notes {site.nonce}"


async def test_a_page_without_content_type_is_read_by_its_first_bytes(site: Site) -> None:
    result = await fetcher(site)(site.url + "/untyped")
    assert result.ok, result.content
    assert result.data["kind"] == "html"
    assert result.data["title"] == "Untyped"


async def test_the_declared_charset_is_used(site: Site) -> None:
    result = await fetcher(site)(site.url + "/latin1.txt")
    assert result.ok
    assert result.data["markdown"] == "caf\u00e9 cr\u00e8me"


async def test_an_http_error_is_a_failure_with_its_status(site: Site) -> None:
    result = await fetcher(site)(site.url + "/missing")
    assert result.status == "failure"
    assert "the site answered HTTP 404 Not Found" in result.content


async def test_a_site_that_is_down_is_a_failure(site: Site) -> None:
    url = site.url
    site.stop()
    result = await fetcher(site)(url + "/")
    assert result.status == "failure"
    assert "could not be reached (ConnectError" in result.content


async def test_an_empty_url_and_a_disabled_fetch_are_failures(site: Site) -> None:
    assert "The URL is empty" in (await fetcher(site)("  ")).content
    off = await fetcher(site, enabled=False)(site.url + "/")
    assert off.status == "failure"
    assert "WEB_FETCH=0" in off.content
    assert site.paths == []


async def test_settings_reach_the_fetch(tmp_path: Path, site: Site) -> None:
    settings = make_settings(
        tmp_path, web_allow_hosts=f" other.example , 127.0.0.1:{site.port}", web_render="never"
    )
    assert offered(settings)
    assert not offered(make_settings(tmp_path, web_fetch=False))
    result = await web_fetch(site.url + "/", settings)
    assert result.ok, result.content
    assert site.nonce in result.content
