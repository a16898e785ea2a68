"""Tool overhead figures: `uv run python bench/bench_tools.py`. Prints, never asserts.

A web_search against the fake SearXNG and a web_fetch against the test site, both on
127.0.0.1, compared with a plain httpx GET of the same URL in the same run (the server's own
time plus a bare client). Overhead = the tool's p50 minus the plain GET's p50 (goal: at
most 20 ms). The tool runs the way the server would run it: its own client per call (a new
connection, the guarded transport, the policy's DNS check), the answer parsed and formatted,
and for pages the Markdown extraction.
"""

from __future__ import annotations

import asyncio
import statistics
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import httpx

from backend.tools.search import SearchConfig, WebSearch
from backend.tools.web import FetchConfig, NetworkPolicy, WebFetch
from backend.tools.web.policy import guarded_client
from tests.tools.search.fakesearch import FakeSearch
from tests.tools.web.site import Site

ROUNDS = 200
WARMUP = 5
CTX = httpx.create_ssl_context()  # the baseline does not pay for a CA bundle per call either


async def timed(call: Callable[[], Awaitable[object]]) -> list[float]:
    for _ in range(WARMUP):
        await call()
    out = []
    for _ in range(ROUNDS):
        start = time.perf_counter()
        await call()
        out.append((time.perf_counter() - start) * 1000)
    return out


def p50(values: list[float]) -> float:
    return statistics.median(values)


def p90(values: list[float]) -> float:
    return statistics.quantiles(values, n=10)[-1]


def row(name: str, values: list[float], base: list[float]) -> None:
    print(
        f"  {name:<38} p50 {p50(values):7.2f} ms  p90 {p90(values):7.2f} ms  "
        f"overhead p50 {p50(values) - p50(base):+7.2f} ms  ratio {p50(values) / p50(base):5.2f}x"
    )


async def plain_get(url: str, client: httpx.AsyncClient | None = None) -> list[float]:
    async def call() -> None:
        if client is not None:
            (await client.get(url)).read()
            return
        async with httpx.AsyncClient(verify=CTX) as own:
            (await own.get(url)).read()

    return await timed(call)


async def bench_search(fake: FakeSearch) -> None:
    url = f"{fake.url}/search?q=planact&format=json"
    config = SearchConfig(provider="searxng", url=fake.url, max_results=8)
    print("web_search (SearXNG JSON, 12 hits, 8 kept)")
    async with httpx.AsyncClient() as shared:
        for label, client in (("a client per call", None), ("one shared client", shared)):
            base = await plain_get(url, client)
            search = WebSearch(config, client)

            async def tool(search: WebSearch = search) -> None:
                result = await search("planact")
                assert result.ok, result.content

            values = await timed(tool)
            row(f"plain httpx GET, {label}", base, base)
            row(f"web_search, {label}", values, base)


async def bench_fetch(site: Site) -> None:
    config = FetchConfig(render="never", allow_hosts=frozenset({f"127.0.0.1:{site.port}"}))
    for path, label in (("/notes.txt", "plain text"), ("/", "HTML page, Markdown extracted")):
        url = site.url + path
        print(f"web_fetch {path} ({label})")
        async with (
            httpx.AsyncClient() as shared,
            guarded_client(NetworkPolicy(config.allow_hosts), config.timeout) as guarded,
        ):
            for name, client, tool_client in (
                ("a client per call", None, None),
                ("one shared client", shared, guarded),
            ):
                base = await plain_get(url, client)
                fetch = WebFetch(config, tool_client)

                async def tool(fetch: WebFetch = fetch, url: str = url) -> None:
                    result = await fetch(url)
                    assert result.ok, result.content

                values = await timed(tool)
                row(f"plain httpx GET, {name}", base, base)
                row(f"web_fetch, {name}", values, base)


async def main() -> None:
    fake = FakeSearch().start()
    site = Site().start()
    try:
        print(f"{ROUNDS} rounds each after {WARMUP} warm-up rounds; servers on 127.0.0.1")
        await bench_search(fake)
        await bench_fetch(site)
    finally:
        fake.stop()
        site.stop()


if __name__ == "__main__":
    asyncio.run(main())
