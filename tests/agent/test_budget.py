"""Run budgets: which limit is named, what was spent, how settings read "no limit"."""

from __future__ import annotations

from pathlib import Path

import pytest

from backend.agent.budget import Budget, BudgetExceeded, limits
from backend.config import Settings
from backend.llm.base import Completion
from backend.messages.payloads import RunBudget
from tests.support.settings import make_settings


def _completion(tokens: int, cost: float | None) -> Completion:
    return Completion(text="", prompt_tokens=tokens, completion_tokens=0, cost=cost)


def test_defaults_match_the_contract(tmp_path: Path) -> None:
    assert limits(make_settings(tmp_path)) == RunBudget(
        max_tokens=2_000_000, max_cost_usd=None, max_seconds=3600.0, max_model_calls=200
    )


@pytest.mark.parametrize("value", ["", "none", "None", "0", "off"])
def test_no_limit_spellings(monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    monkeypatch.setenv("RUN_MAX_TOKENS", value)
    monkeypatch.setenv("RUN_MAX_COST_USD", value)
    settings = Settings(_env_file=None)
    assert settings.run_max_tokens is None and settings.run_max_cost_usd is None


def test_env_values_are_read(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RUN_MAX_COST_USD", "2.5")
    monkeypatch.setenv("RUN_MAX_MODEL_CALLS", "7")
    settings = Settings(_env_file=None)
    assert (settings.run_max_cost_usd, settings.run_max_model_calls) == (2.5, 7)


def test_first_limit_reached_is_named_with_the_spend(tmp_path: Path) -> None:
    settings = make_settings(tmp_path, run_max_tokens=100, run_max_model_calls=3)
    budget = Budget()
    budget.check(settings)
    budget.add(_completion(60, 0.25))
    budget.check(settings)
    budget.add(_completion(60, None))
    with pytest.raises(BudgetExceeded) as info:
        budget.check(settings)
    assert info.value.setting == "RUN_MAX_TOKENS"
    message = str(info.value)
    assert message.startswith("The run stopped: it reached RUN_MAX_TOKENS (100 tokens).")
    assert "Spent: 120 tokens, $0.2500 (some calls had no price), 2 model calls" in message
    assert "Raise RUN_MAX_TOKENS" in message


def test_unlimited_never_stops(tmp_path: Path) -> None:
    settings = make_settings(
        tmp_path,
        run_max_tokens=None,
        run_max_model_calls=None,
        run_max_seconds=None,
        run_max_cost_usd=None,
    )
    budget = Budget()
    for _ in range(500):
        budget.add(_completion(10_000, 1.0))
        budget.check(settings)
    assert budget.calls == 500
