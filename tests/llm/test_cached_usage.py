"""Cached input tokens are read from every provider's usage, on both paths, streamed and
not, and priced at the provider's cached rates from litellm's price table."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator

import pytest

from backend.llm.dispatch import DispatchLLM
from backend.llm.litellm_client import import_litellm
from backend.llm.prices import lookup
from tests.fakellm import FakeModelServer

MSGS = [{"role": "user", "content": "hi"}]
OPENAI = "openai/gpt-4o-mini"
CLAUDE = "anthropic/claude-sonnet-4-5-20250929"


@pytest.fixture
async def made() -> AsyncIterator[list[DispatchLLM]]:
    llms: list[DispatchLLM] = []
    yield llms
    for llm in llms:
        await llm.aclose()


def _llm(made: list[DispatchLLM], fake: FakeModelServer, model: str, **kw: object) -> DispatchLLM:
    llm = DispatchLLM(model, api_key="sk-test", base_url=fake.base_url, **kw)  # type: ignore[arg-type]
    made.append(llm)
    return llm


@pytest.mark.parametrize("client", ["auto", "litellm"])
@pytest.mark.parametrize("stream", [True, False])
async def test_openai_cached_tokens_are_read_and_priced_at_the_cached_rate(
    fake_model: FakeModelServer, made: list[DispatchLLM], client: str, stream: bool
) -> None:
    fake_model.script(
        {
            "stage": "thinking",
            "content": "ok",
            "prompt_tokens": 10_000,
            "cached_tokens": 8_064,
            "completion_tokens": 200,
        }
    )
    got = await _llm(made, fake_model, OPENAI, client=client, stream=stream).complete(
        stage="thinking", messages=MSGS
    )
    assert (got.prompt_tokens, got.cached_input_tokens, got.cache_write_tokens) == (
        10_000,
        8_064,
        0,
    )
    price = lookup("gpt-4o-mini")
    assert price is not None and price.cache_read < price.prompt  # the table has a cached rate
    expected = 1_936 * price.prompt + 8_064 * price.cache_read + 200 * price.completion
    assert got.cost == pytest.approx(expected, rel=1e-9)
    assert got.cache_cost == pytest.approx(8_064 * price.cache_read)


async def test_the_price_agrees_with_litellms_own_cost_function(
    fake_model: FakeModelServer, made: list[DispatchLLM]
) -> None:
    fake_model.script(
        {
            "stage": "thinking",
            "content": "ok",
            "prompt_tokens": 10_000,
            "cached_tokens": 8_064,
            "completion_tokens": 200,
        }
    )
    llm = _llm(made, fake_model, OPENAI, client="litellm")
    got = await llm.complete(stage="thinking", messages=MSGS)
    litellm = import_litellm()
    usage = litellm.Usage(
        prompt_tokens=10_000,
        completion_tokens=200,
        prompt_tokens_details={"cached_tokens": 8_064},
    )
    theirs = sum(litellm.cost_per_token(model=OPENAI, usage_object=usage))
    assert got.cost == pytest.approx(theirs, rel=0.01)


@pytest.mark.parametrize("stream", [True, False])
async def test_anthropic_cache_reads_and_writes_are_read_over_the_messages_api(
    fake_model: FakeModelServer, made: list[DispatchLLM], stream: bool
) -> None:
    assert os.environ.get("LITELLM_LOCAL_MODEL_COST_MAP") == "True"
    fake_model.script(
        {
            "stage": "thinking",
            "content": "from claude",
            "prompt_tokens": 300,  # Anthropic's input_tokens: the uncached rest
            "cached_tokens": 9_000,
            "cache_write_tokens": 700,
            "completion_tokens": 150,
        }
    )
    llm = _llm(made, fake_model, CLAUDE, stream=stream)
    assert llm.path() == "litellm"
    got = await llm.complete(stage="thinking", messages=MSGS)
    assert got.text == "from claude"
    assert fake_model.model.calls[-1]["path"].endswith("/messages")
    assert (got.prompt_tokens, got.cached_input_tokens, got.cache_write_tokens) == (
        10_000,
        9_000,
        700,
    )
    price = lookup(CLAUDE)
    assert price is not None and price.cache_write > price.prompt > price.cache_read
    expected = (
        300 * price.prompt
        + 9_000 * price.cache_read
        + 700 * price.cache_write
        + 150 * price.completion
    )
    assert got.cost == pytest.approx(expected, rel=1e-9)


async def test_a_usage_without_cache_fields_counts_nothing_cached(
    fake_model: FakeModelServer, made: list[DispatchLLM]
) -> None:
    fake_model.script({"stage": "route", "content": "{}", "prompt_tokens": 500})
    got = await _llm(made, fake_model, OPENAI).complete(stage="route", messages=MSGS)
    assert (got.prompt_tokens, got.cached_input_tokens, got.cache_write_tokens) == (500, 0, 0)
    price = lookup(OPENAI)
    assert price is not None
    assert got.cost == pytest.approx(500 * price.prompt + 7 * price.completion)


async def test_more_cached_tokens_than_input_are_capped_at_the_input(
    fake_model: FakeModelServer, made: list[DispatchLLM]
) -> None:
    fake_model.script(
        {"stage": "route", "content": "{}", "prompt_tokens": 100, "cached_tokens": 5_000}
    )
    got = await _llm(made, fake_model, OPENAI).complete(stage="route", messages=MSGS)
    assert (got.prompt_tokens, got.cached_input_tokens) == (100, 100)
