from __future__ import annotations

from pathlib import Path

import pytest

from backend.agent.routing import match_keywords, parse_route_reply
from backend.agent.specialists import (
    BUILTIN,
    Specialist,
    SpecialistsFileError,
    load_specialists,
)

TABLE = (
    Specialist("general_chat", False, "openai/small-chat", ("what is", "explain", "who is")),
    Specialist("code_generation", True, "openrouter/qwen", ("script", "code", "python")),
)


@pytest.mark.parametrize(
    ("goal", "expected"),
    [
        ("What is a monad?", "general_chat"),
        ("EXPLAIN this python code", "general_chat"),  # list order: first hit wins
        ("write a Python script", "code_generation"),
        ("decode this", None),  # word boundaries: 'code' is not in 'decode'
        ("Tell me a joke", None),
    ],
)
def test_keywords_case_insensitive_first_hit_wins(goal: str, expected: str | None) -> None:
    hit = match_keywords(goal, TABLE)
    assert (hit.task_type if hit else None) == expected


def test_builtin_table_routes_common_goals() -> None:
    tools = match_keywords("Write a python script, run it, save its output", BUILTIN)
    assert tools is not None and tools.needs_tools
    chat = match_keywords("What is the capital of France?", BUILTIN)
    assert chat is not None and not chat.needs_tools


def test_specialists_file(tmp_path: Path) -> None:
    f = tmp_path / "s.yaml"
    f.write_text(
        "specialists:\n"
        "  - task_type: general_chat\n    needs_tools: false\n    model: openai/small-chat\n"
        "    keywords: ['what is', 'explain']\n"
        "  - task_type: code_generation\n    needs_tools: true\n    keywords: [script]\n"
    )
    table = load_specialists(f)
    assert table == (
        Specialist("general_chat", False, "openai/small-chat", ("what is", "explain")),
        Specialist("code_generation", True, None, ("script",)),
    )


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("specialists: 3", "needs a 'specialists:' list"),
        ("specialists:\n  - needs_tools: true\n", "needs a task_type"),
        ("specialists:\n  - task_type: x\n    keywords: nope\n", "keywords is a list"),
        ("specialists: [", "cannot be read"),
    ],
)
def test_bad_specialists_file_says_what_is_wrong(tmp_path: Path, text: str, message: str) -> None:
    f = tmp_path / "s.yaml"
    f.write_text(text)
    with pytest.raises(SpecialistsFileError, match=message):
        load_specialists(f)


def test_missing_specialists_file(tmp_path: Path) -> None:
    with pytest.raises(SpecialistsFileError, match="cannot be read"):
        load_specialists(tmp_path / "nope.yaml")


def test_route_reply_parsing() -> None:
    got = parse_route_reply('Sure: {"task_type": "code_generation", "needs_tools": true}', TABLE)
    assert got == Specialist(
        "code_generation", True, "openrouter/qwen", ("script", "code", "python")
    )
    chat = parse_route_reply('{"task_type": "general_chat", "needs_tools": false}', TABLE)
    assert chat is not None and chat.model == "openai/small-chat"
    assert parse_route_reply("no json here", TABLE) is None
    assert parse_route_reply('{"task_type": "x", "needs_tools": "yes"}', TABLE) is None
    assert parse_route_reply("{broken", TABLE) is None
