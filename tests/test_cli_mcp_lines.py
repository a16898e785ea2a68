"""`planact run` and MCP: a server that is down is one [note] line, never a failed tool; a
tool's progress is printed live, and its result is still printed after it."""

from __future__ import annotations

from backend.actions import builtin_registry
from backend.agent.tool_notices import tool_notice
from backend.cli.progress import Progress, progress_line
from backend.messages.deltas import DeltaEvent
from backend.messages.message import Message

REGISTRY = builtin_registry()


def test_a_notice_is_a_note_line() -> None:
    line = progress_line(REGISTRY, tool_notice("MCP server 'broken' could not start.\nfatal", "t1"))
    assert line == "[note] MCP server 'broken' could not start.\n    fatal"


def test_progress_is_printed_live_and_the_result_after_it() -> None:
    out: list[str] = []
    p = Progress(REGISTRY, out.append)
    running = Message.build("mcp_tool", "Calling calc__steps {}", status="running")
    p.message(running)
    for text in ("1/2: step 1 of 2\n", "2/2: step 2 of 2\n"):
        p.delta(
            DeltaEvent.model_validate(
                {"uuid": running.uuid, "action_type": "mcp_tool", "stream": "stdout", "text": text}
            )
        )
    assert out[1:] == ["  | 1/2: step 1 of 2", "  | 2/2: step 2 of 2"]
    data = [{"name": "calc__steps", "arguments": {"count": 2}, "parts": []}]
    p.message(Message.build("mcp_tool", "2 steps done", uuid=running.uuid, json=data))
    assert out[-1] == '[mcp_tool ok] calc__steps {"count": 2}\n    2 steps done'
