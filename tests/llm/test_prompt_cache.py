"""What a call tells the provider's prompt cache: breakpoints where the provider takes them
(Anthropic, through litellm), a cache key where it takes one (OpenAI), and never a field a
server refuses."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from backend.llm.caching import MAX_BREAKPOINTS, breakpoints, keyed
from backend.llm.dispatch import DispatchLLM
from backend.llm.openai_compat import OpenAICompatLLM
from tests.fakellm import FakeModelServer

CLAUDE = "anthropic/claude-sonnet-4-5-20250929"
TURNS = [
    {"role": "system", "content": "the run's fixed part"},
    {"role": "user", "content": "the task"},
    {"role": "assistant", "content": "a reply"},
    {"role": "user", "content": "its result"},
]


@pytest.fixture
async def made() -> AsyncIterator[list[Any]]:
    llms: list[Any] = []
    yield llms
    for llm in llms:
        await llm.aclose()


def _marks(call: dict[str, Any]) -> list[str]:
    """Where the request's cache_control breakpoints are: "system" or "message <i>"."""
    found = []
    for block in call["system"] or []:
        if isinstance(block, dict) and block.get("cache_control"):
            found.append("system")
    for i, message in enumerate(call["messages"]):
        content = message.get("content")
        for block in content if isinstance(content, list) else []:
            if isinstance(block, dict) and block.get("cache_control"):
                found.append(f"message {i}")
    return found


def test_breakpoints_mark_the_stable_prefix_and_the_latest_message() -> None:
    assert breakpoints(TURNS) == [
        {"location": "message", "index": 0},
        {"location": "message", "index": 3},
    ]
    # a prompt of system messages only: one breakpoint, at its end
    assert breakpoints(TURNS[:1]) == [{"location": "message", "index": 0}]
    assert breakpoints([]) == []


@pytest.mark.parametrize("stream", [True, False])
async def test_anthropic_requests_carry_the_breakpoints(
    fake_model: FakeModelServer, made: list[Any], stream: bool
) -> None:
    llm = DispatchLLM(CLAUDE, api_key="sk-test", base_url=fake_model.base_url, stream=stream)
    made.append(llm)
    for n in (2, 4):
        fake_model.script({"stage": "thinking", "content": "ok"})
        await llm.complete(stage="thinking", messages=TURNS[:n])
    first, second = fake_model.model.calls
    # litellm sends the system prompt apart (Anthropic's `system`): its end is the first mark
    assert _marks(first) == ["system", "message 0"]
    assert _marks(second) == ["system", "message 2"]
    assert all(len(_marks(c)) <= MAX_BREAKPOINTS for c in fake_model.model.calls)


async def test_openai_gets_the_conversation_as_its_cache_key(made: list[Any]) -> None:
    sent: list[dict[str, Any]] = []

    def answer(request: httpx.Request) -> httpx.Response:
        sent.append(json.loads(request.content))
        body = {"choices": [{"message": {"content": "ok"}, "finish_reason": "stop"}]}
        return httpx.Response(200, json=body)

    llm = OpenAICompatLLM(
        "openai/gpt-4o-mini", api_key="k", stream=False, transport=httpx.MockTransport(answer)
    )
    made.append(llm)
    with keyed("conv-1"):
        await llm.complete(stage="thinking", messages=TURNS)
    await llm.complete(stage="thinking", messages=TURNS)  # no conversation: no key
    assert sent[0]["prompt_cache_key"] == "conv-1"
    assert "prompt_cache_key" not in sent[1]


@pytest.mark.parametrize("client", ["auto", "litellm"])
async def test_a_server_that_refuses_unknown_fields_still_gets_a_request_it_accepts(
    fake_model: FakeModelServer, made: list[Any], client: str
) -> None:
    fake_model.model.strict = True
    fake_model.script({"stage": "thinking", "content": "accepted"})
    llm = DispatchLLM(
        "openai/gpt-4o-mini",
        api_key="sk-test",
        base_url=fake_model.base_url,
        client=client,  # type: ignore[arg-type]
        max_retries=0,
    )
    made.append(llm)
    with keyed("conv-1"):
        got = await llm.complete(stage="thinking", messages=TURNS)
    assert got.text == "accepted"
    (call,) = fake_model.model.calls
    assert "prompt_cache_key" not in call["params"]


async def test_the_strict_server_does_refuse_an_unknown_field(fake_model: FakeModelServer) -> None:
    """The strict mode the test above relies on is real: an unknown field is a 400."""
    fake_model.model.strict = True
    async with httpx.AsyncClient() as http:
        refused = await http.post(
            fake_model.base_url + "/chat/completions",
            json={"model": "m", "messages": TURNS, "max_tokens": 64, "prompt_cache_key": "k"},
        )
    assert refused.status_code == 400
    assert "prompt_cache_key" in refused.json()["error"]["message"]
