"""The fake model's cache simulation (tests/cachesim.py), which the cache figures rest on,
follows the providers' documented rules."""

from __future__ import annotations

from typing import Any

from tests.cachesim import AnthropicCache, OpenAICache, tokens

WORDS = " ".join(f"word{i}" for i in range(3_000))  # well over 1,024 tokens


def test_tokens_are_o200k_base() -> None:
    assert tokens("hello world") == [24912, 2375]


def test_openai_serves_a_shared_prefix_of_1024_tokens_or_more_in_128_token_steps() -> None:
    cache = OpenAICache()
    first = [{"role": "user", "content": WORDS}]
    assert cache.request(None, first).cache_read == 0
    again = cache.request(None, [*first, {"role": "user", "content": "more"}])
    assert again.cache_read >= 1024 and (again.cache_read - 1024) % 128 == 0
    assert again.input_tokens - again.cache_read < 128 + 10
    short = OpenAICache()
    small = [{"role": "user", "content": "word " * 500}]
    short.request(None, small)
    assert short.request(None, small).cache_read == 0  # under 1,024 tokens: nothing


def _marked(text: str) -> list[dict[str, Any]]:
    return [{"type": "text", "text": text, "cache_control": {"type": "ephemeral"}}]


def test_anthropic_reads_only_what_a_breakpoint_wrote() -> None:
    cache = AnthropicCache()
    plain = [{"role": "user", "content": WORDS}]
    first = cache.request(None, plain, now=0)
    assert (first.cache_read, first.cache_write) == (0, 0)  # no breakpoint: no cache
    marked = [{"role": "user", "content": _marked(WORDS)}]
    wrote = cache.request(None, marked, now=1)
    assert (wrote.cache_read, wrote.cache_write) == (0, wrote.input_tokens)
    longer: list[dict[str, Any]] = [
        {"role": "user", "content": [{"type": "text", "text": WORDS}]},
        {"role": "assistant", "content": "reply"},
        {"role": "user", "content": _marked("result")},
    ]
    read = cache.request(None, longer, now=2)  # the lookback finds the earlier breakpoint
    assert read.cache_read == wrote.input_tokens
    assert read.cache_write == read.input_tokens - read.cache_read
    expired = cache.request(None, longer, now=2 + 301)
    assert expired.cache_read == 0
