"""What a run spent, end to end: the fake model reports cached input as OpenAI does, the app
(its own model client, over HTTP) stores it, prices it at the cached rates of litellm's
table, shows it per run and per conversation, and budgets the real price."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from backend.llm.prices import lookup
from tests.agent.scripts import finish, plan_reply, write
from tests.fakellm import FakeModelServer
from tests.support.asgi import client_for, post_run
from tests.support.settings import make_settings

MODEL = "openai/gpt-4o-mini"
CALLS = [  # stage, input tokens, of them cached, output tokens
    ("planning", 2_000, 1_024, 50),
    ("thinking", 3_000, 2_048, 80),
]


def _script(
    fake: FakeModelServer, calls: list[tuple[str, int, int, int]], done: bool = True
) -> None:
    replies = {
        "planning": plan_reply("Write it"),
        "thinking": write("out.txt", "hi\n") + ("\n" + finish("Wrote out.txt.") if done else ""),
    }
    fake.script(
        *(
            {
                "stage": stage,
                "content": replies[stage],
                "prompt_tokens": prompt,
                "cached_tokens": cached,
                "completion_tokens": out,
            }
            for stage, prompt, cached, out in calls
        )
    )


def _price(calls: list[tuple[str, int, int, int]]) -> float:
    p = lookup(MODEL)
    assert p is not None
    return sum(
        (prompt - cached) * p.prompt + cached * p.cache_read + out * p.completion
        for _, prompt, cached, out in calls
    )


def _settings(tmp_path: Path, fake: FakeModelServer, **more: Any) -> Any:
    return make_settings(
        tmp_path, llm_model=MODEL, llm_api_key="sk-test", llm_base_url=fake.base_url, **more
    )


def test_the_stored_and_shown_usage_is_what_the_provider_reported(
    tmp_path: Path, fake_model: FakeModelServer
) -> None:
    _script(fake_model, CALLS)
    with client_for(_settings(tmp_path, fake_model), None) as client:  # type: ignore[arg-type]
        messages, end, _ = post_run(client, {"goal": "write out.txt", "mode": "agent"})
        assert end["status"] == "completed", messages[-1]["content"]
        detail = client.get(f"/api/conversations/{messages[0]['conversation_id']}").json()
    (run,) = detail["runs"]
    spent = run["usage"]
    assert spent["calls"] == 2
    assert spent["input_tokens"] == detail["input_tokens"] == 5_000
    assert spent["cached_input_tokens"] == detail["cached_input_tokens"] == 3_072
    assert spent["cache_write_tokens"] == detail["cache_write_tokens"] == 0
    assert spent["output_tokens"] == detail["output_tokens"] == 130
    assert spent["cost_usd"] == pytest.approx(_price(CALLS), rel=1e-9)
    assert detail["cost_usd"] == pytest.approx(_price(CALLS), rel=1e-9)
    # the uncached price would be higher: the cached rate is what was stored
    p = lookup(MODEL)
    assert p is not None and spent["cost_usd"] < 5_000 * p.prompt + 130 * p.completion
    thinking = detail["usage"]["stages"]["thinking"]
    assert (thinking["input_tokens"], thinking["cached_input_tokens"]) == (3_000, 2_048)


def test_the_cost_budget_counts_the_cached_price(
    tmp_path: Path, fake_model: FakeModelServer
) -> None:
    p = lookup(MODEL)
    assert p is not None
    # planning: a million input tokens, 90 % of them from the cache
    big = [("planning", 1_000_000, 900_000, 10), ("thinking", 1_000_000, 900_000, 10)]
    real = _price(big[:1])
    uncached = 1_000_000 * p.prompt + 10 * p.completion
    limit = (real + uncached) / 2  # over the cached price, under the uncached one
    _script(fake_model, big, done=False)  # a third call would be needed: the budget stops it
    settings = _settings(tmp_path, fake_model, run_max_cost_usd=limit, run_max_tokens=None)
    with client_for(settings, None) as client:  # type: ignore[arg-type]
        messages, end, _ = post_run(client, {"goal": "write out.txt", "mode": "agent"})
    stages = [c["stage"] for c in fake_model.model.calls]
    # the planning call's real price is under the limit: the thinking call is made, and
    # the run stops only after it (at the real price of both)
    assert stages == ["planning", "thinking"]
    assert end["status"] == "failed"
    error = next(m for m in messages if m["meta"]["action_type"] == "error")
    assert "RUN_MAX_COST_USD" in error["content"]


CLAUDE = "anthropic/claude-sonnet-4-5-20250929"


def test_a_claude_run_sends_its_breakpoints_and_stores_the_cache_reads_and_writes(
    tmp_path: Path, fake_model: FakeModelServer
) -> None:
    """Over Anthropic's Messages API, streamed (litellm): every request carries the
    breakpoints (the end of the system prompt, the end of the latest message; never more
    than 4), and the run's usage is what the model reported."""
    fake_model.script(
        {"stage": "planning", "content": plan_reply("Write it")},
        {
            "stage": "thinking",
            "content": write("out.txt", "hi\n"),
            "prompt_tokens": 200,
            "cache_write_tokens": 1_500,
        },
        {
            "stage": "thinking",
            "content": finish("Wrote out.txt."),
            "prompt_tokens": 100,
            "cached_tokens": 1_500,
            "cache_write_tokens": 250,
        },
    )
    settings = make_settings(
        tmp_path, llm_model=CLAUDE, llm_api_key="sk-test", llm_base_url=fake_model.base_url
    )
    with client_for(settings, None) as client:  # type: ignore[arg-type]
        messages, end, _ = post_run(client, {"goal": "write out.txt", "mode": "agent"})
        assert end["status"] == "completed", messages[-1]["content"]
        detail = client.get(f"/api/conversations/{messages[0]['conversation_id']}").json()
    calls = fake_model.model.calls
    assert [c["stage"] for c in calls] == ["planning", "thinking", "thinking"]
    for call in calls:
        assert call["stream"] and call["path"].endswith("/messages")
        system_marks = [b for b in call["system"] or [] if b.get("cache_control")]
        message_marks = [
            (i, b)
            for i, m in enumerate(call["messages"])
            for b in (m["content"] if isinstance(m["content"], list) else [])
            if b.get("cache_control")
        ]
        assert len(system_marks) == 1  # the end of the stable prefix
        assert message_marks and message_marks[-1][0] == len(call["messages"]) - 1
        assert len(system_marks) + len(message_marks) <= 4
    thinking = detail["usage"]["stages"]["thinking"]
    # Anthropic's input_tokens is the uncached rest: litellm adds reads and writes to it
    assert thinking["input_tokens"] == 200 + 1_500 + 100 + 1_500 + 250
    assert (thinking["cached_input_tokens"], thinking["cache_write_tokens"]) == (1_500, 1_750)
    p = lookup(CLAUDE)
    assert p is not None
    expected = 300 * p.prompt + 1_500 * p.cache_read + 1_750 * p.cache_write + 14 * p.completion
    assert thinking["cost_usd"] == pytest.approx(expected, rel=1e-9)
