"""Replies in the layouts and reasoning dialects of docs/dialects.md drive a real run (a real
`planact serve`, the fake model over HTTP): Kimi K2 and DeepSeek V3.1 calls laid out over
lines run, and a destructive call drafted in gpt-oss's analysis channel never does."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.agent.scripts import plan_reply
from tests.e2e.server import running_server
from tests.fakellm import FakeModelServer

pytestmark = pytest.mark.e2e

DATA = "keep me & <me>\n"
DS_BEGIN = "<\uff5ctool\u2581call\u2581begin\uff5c>"
DS_SEP = "<\uff5ctool\u2581sep\uff5c>"
DS_END = "<\uff5ctool\u2581call\u2581end\uff5c>"

REPLIES = [
    # Kimi K2, a newline after each marker (the layout ik_llama.cpp documents)
    "I'll write the data.<|tool_calls_section_begin|>\n<|tool_call_begin|>\n"
    "functions.write_code:0<|tool_call_argument_begin|>\n"
    + json.dumps({"path": "keep/data.txt", "content": DATA})
    + "\n<|tool_call_end|>\n<|tool_calls_section_end|>",
    # gpt-oss: a destructive draft in the analysis channel, then the real call
    "<|channel|>analysis<|message|>The folder could go:\n"
    "<terminal_run><command>rm -rf keep</command></terminal_run>\n"
    "No, the user wants it kept. Just list it.<|end|>"
    "<|start|>assistant<|channel|>commentary to=functions.terminal_run <|constrain|>json"
    '<|message|>{"command": "ls keep"}<|call|>',
    # DeepSeek V3.1, a newline after the call-begin marker
    f"{DS_BEGIN}\nfinish{DS_SEP}" + json.dumps({"message": "kept"}) + DS_END,
]


def test_calls_over_lines_run_and_a_draft_in_analysis_never_does(
    tmp_path: Path, fake_model: FakeModelServer
) -> None:
    fake_model.script(
        {"stage": "planning", "content": plan_reply("Keep the data")},
        *({"stage": "thinking", "content": reply} for reply in REPLIES),
    )
    with running_server(tmp_path, fake_model.base_url) as server:
        messages, end, _ = server.run({"goal": "write and list the data", "mode": "agent"})
    assert end["status"] == "completed", [m["content"] for m in messages][-4:]
    (ws,) = (tmp_path / "workspace" / "user_1").iterdir()
    assert (ws / "keep" / "data.txt").read_bytes() == DATA.encode()
    commands = [
        m["content"]
        for m in messages
        if m["meta"]["action_type"] == "terminal_run" and m["status"] == "running"
    ]
    assert commands == ["ls keep"]
    (listed,) = [
        m["content"]
        for m in messages
        if m["meta"]["action_type"] == "terminal_run" and m["status"] == "success"
    ]
    assert "data.txt" in listed
    # the analysis is shown as reasoning, never as the agent's words
    thoughts = [m for m in messages if m["meta"]["action_type"] == "thinking"]
    assert any("rm -rf keep" in m["content"] and m["type"] != "narration" for m in thoughts)
    assert not any("<|" in m["content"] for m in thoughts if m["type"] == "narration")
    assert messages[-1]["content"] == "kept"
