"""web_search against a fake SearXNG / Tavily / Brave on 127.0.0.1, and ddgs's failure path."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from backend.tools.search import SearchConfig, WebSearch, offered, web_search
from tests.support.settings import make_settings
from tests.tools.search.fakesearch import HITS, FakeSearch


@pytest.fixture
def fake() -> Iterator[FakeSearch]:
    server = FakeSearch().start()
    yield server
    server.stop()


def searxng(fake: FakeSearch, **kw: object) -> WebSearch:
    return WebSearch(SearchConfig(provider="searxng", url=fake.url, **kw))  # type: ignore[arg-type]


async def test_searxng_results_come_back_capped_to_search_max(fake: FakeSearch) -> None:
    result = await searxng(fake, max_results=3)("planact   nonce\nsearch")
    assert result.ok, result.content
    assert result.data["results"] == HITS[:3]
    assert result.data["provider"] == "searxng"
    assert "1. Result 1\n   https://example.org/page1\n   snippet 1" in result.content
    assert "Result 4" not in result.content
    (req,) = fake.requests
    assert req["path"] == "/search"
    assert req["query"] == {"q": ["planact nonce search"], "format": ["json"]}


LABELS = {"searxng": "SearXNG", "tavily": "Tavily", "brave": "Brave"}


def provider(name: str, fake: FakeSearch | str, **kw: object) -> WebSearch:
    url = fake if isinstance(fake, str) else fake.url
    key = None if name == "searxng" else "key"
    return WebSearch(SearchConfig(provider=name, url=url, api_key=key, **kw))  # type: ignore[arg-type]


@pytest.mark.parametrize("name", ["searxng", "tavily", "brave"])
@pytest.mark.parametrize(
    ("mode", "words"),
    [
        ("429", "{label} refused the search: rate limited (HTTP 429) (it asks to retry after 7 s)"),
        ("error", "{label} answered HTTP 500"),
        ("garbage", "{label} answered something that is not JSON"),
        ("shapeless", "{label} answered JSON without a list of search results"),
        ("junk_links", "{label} answered results without usable links"),
        ("huge", "{label} answered more than 4000000 bytes"),
    ],
)
async def test_provider_faults_are_failure_results_in_plain_words(
    fake: FakeSearch, name: str, mode: str, words: str
) -> None:
    fake.mode = mode
    result = await provider(name, fake)("anything")
    assert result.status == "failure"
    assert result.content.startswith("Web search failed: ")
    assert words.format(label=LABELS[name]) in result.content
    assert result.data["results"] == []
    assert len(fake.requests) == 1


@pytest.mark.parametrize("name", ["searxng", "tavily", "brave"])
async def test_a_slow_provider_is_a_timeout_failure(fake: FakeSearch, name: str) -> None:
    fake.mode = "slow"
    result = await provider(name, fake, timeout=0.3)("anything")
    assert result.status == "failure"
    assert f"{LABELS[name]} did not answer" in result.content


@pytest.mark.parametrize("name", ["searxng", "tavily", "brave"])
async def test_a_provider_that_is_down_is_a_failure(fake: FakeSearch, name: str) -> None:
    url = fake.url
    fake.stop()
    result = await provider(name, url)("anything")
    assert result.status == "failure"
    assert f"{LABELS[name]} could not be reached" in result.content


async def test_no_results_is_a_success_that_says_so(fake: FakeSearch) -> None:
    fake.mode = "empty"
    result = await searxng(fake)("nothing matches")
    assert result.ok
    assert result.content == "No results for 'nothing matches'."
    assert result.data["results"] == []


async def test_an_empty_or_huge_query_is_refused_without_a_request(fake: FakeSearch) -> None:
    empty = await searxng(fake)("  \n ")
    huge = await searxng(fake)("x" * 501)
    assert empty.status == huge.status == "failure"
    assert "empty" in empty.content
    assert "501 characters" in huge.content
    assert fake.requests == []


async def test_tavily_posts_the_query_with_the_key_as_bearer(fake: FakeSearch) -> None:
    search = WebSearch(
        SearchConfig(provider="tavily", url=fake.url, api_key="tvly-k", max_results=2)
    )
    result = await search("tavily query")
    assert result.ok, result.content
    assert [r["url"] for r in result.data["results"]] == [HITS[0]["url"], HITS[1]["url"]]
    (req,) = fake.requests
    assert (req["method"], req["path"]) == ("POST", "/search")
    assert req["headers"]["authorization"] == "Bearer tvly-k"
    assert req["body"] == {"query": "tavily query", "max_results": 2}


async def test_brave_sends_its_subscription_token(fake: FakeSearch) -> None:
    search = WebSearch(SearchConfig(provider="brave", url=fake.url, api_key="bk", max_results=4))
    result = await search("brave query")
    assert result.ok, result.content
    assert result.data["results"] == HITS[:4]
    (req,) = fake.requests
    assert req["path"] == "/res/v1/web/search"
    assert req["headers"]["x-subscription-token"] == "bk"
    assert req["query"] == {"q": ["brave query"], "count": ["4"]}


async def test_ddgs_failing_backends_become_a_failure_result(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # every ddgs backend goes through this proxy, a closed loopback port: nothing leaves
    # the machine, and each backend's request fails at once
    monkeypatch.setenv("DDGS_PROXY", "http://127.0.0.1:9")
    result = await WebSearch(SearchConfig(provider="ddgs", timeout=5))("planact")
    assert result.status == "failure"
    assert result.content.startswith("Web search failed: DuckDuckGo search (ddgs)")


@pytest.mark.parametrize(
    ("env", "problem"),
    [
        ({}, "SEARCH_PROVIDER is not set"),
        ({"search_provider": "searxng"}, "needs SEARCH_URL"),
        ({"search_provider": "tavily"}, "needs SEARCH_API_KEY"),
        ({"search_provider": "brave", "search_url": "http://x"}, "needs SEARCH_API_KEY"),
    ],
)
async def test_an_unusable_configuration_is_not_offered(
    tmp_path: Path, env: dict[str, str], problem: str
) -> None:
    settings = make_settings(tmp_path, **env)
    assert not offered(settings)
    result = await web_search("q", settings)
    assert result.status == "failure"
    assert problem in result.content


@pytest.mark.parametrize(
    "env",
    [
        {"search_provider": "ddgs"},
        {"search_provider": "searxng", "search_url": "http://searxng:8080"},
        {"search_provider": "brave", "search_api_key": "k"},
    ],
)
def test_a_usable_configuration_is_offered(tmp_path: Path, env: dict[str, str]) -> None:
    assert offered(make_settings(tmp_path, **env))


async def test_settings_reach_the_provider(tmp_path: Path, fake: FakeSearch) -> None:
    settings = make_settings(
        tmp_path, search_provider="searxng", search_url=fake.url + "/", search_max=2
    )
    result = await web_search("via settings", settings)
    assert result.ok
    assert len(result.data["results"]) == 2
