"""The litellm client against the fake OpenAI-compatible server (real HTTP)."""

from __future__ import annotations

import pytest

from backend.llm.base import LLMConfigError, LLMError
from backend.llm.client import LiteLLM
from tests.fakellm import FakeModelServer

MSGS = [{"role": "user", "content": "hi"}]


def client(fake: FakeModelServer, **kw: object) -> LiteLLM:
    return LiteLLM(
        "openai/fake",
        api_key="sk-test",
        base_url=fake.base_url,
        retry_base_delay=0.01,
        **kw,  # type: ignore[arg-type]
    )


@pytest.mark.parametrize("stream", [True, False])
async def test_stage_header_text_and_usage(fake_model: FakeModelServer, stream: bool) -> None:
    fake_model.script(
        {"stage": "planning", "content": "x" * 300, "prompt_tokens": 9, "completion_tokens": 4}
    )
    got = await client(fake_model, stream=stream).complete(stage="planning", messages=MSGS)
    assert got.text == "x" * 300
    assert (got.prompt_tokens, got.completion_tokens) == (9, 4)
    assert got.finish_reason == "stop"
    call = fake_model.model.calls[-1]
    assert call["stage"] == "planning" and call["stream"] is stream
    assert call["authorization"] == "Bearer sk-test"


@pytest.mark.parametrize("status", [429, 500, 503])
async def test_retries_transient_errors_then_succeeds(
    fake_model: FakeModelServer, status: int
) -> None:
    fake_model.script(
        {"stage": "thinking", "status": status, "content": "busy"},
        {"stage": "thinking", "status": status, "content": "busy"},
        {"stage": "thinking", "content": "ok"},
    )
    got = await client(fake_model).complete(stage="thinking", messages=MSGS)
    assert got.text == "ok"
    assert len(fake_model.model.calls) == 3


async def test_gives_up_after_bounded_retries(fake_model: FakeModelServer) -> None:
    fake_model.script(*({"stage": "summary", "status": 503, "content": "down"},) * 3)
    with pytest.raises(LLMError, match="after 3 attempts"):
        await client(fake_model, max_retries=2).complete(stage="summary", messages=MSGS)
    assert len(fake_model.model.calls) == 3


async def test_wrong_key_is_a_config_error(fake_model: FakeModelServer) -> None:
    fake_model.script({"stage": "route", "status": 401, "content": "invalid api key"})
    with pytest.raises(LLMConfigError, match="LLM_API_KEY"):
        await client(fake_model).complete(stage="route", messages=MSGS)
    assert len(fake_model.model.calls) == 1  # never retried


async def test_missing_model_is_a_config_error() -> None:
    with pytest.raises(LLMConfigError, match="LLM_MODEL"):
        await LiteLLM(None).complete(stage="route", messages=MSGS)


async def test_native_tool_calls_come_back(fake_model: FakeModelServer) -> None:
    call = {
        "id": "c1",
        "type": "function",
        "function": {"name": "read_file", "arguments": '{"path": "a.txt"}'},
    }
    fake_model.script(
        {"stage": "thinking", "content": "", "tool_calls": [call], "finish_reason": "tool_calls"}
    )
    got = await client(fake_model).complete(stage="thinking", messages=MSGS)
    assert got.tool_calls is not None
    assert got.tool_calls[0]["function"] == call["function"]
