"""Scripted replies in several model dialects drive a real run; the files on disk are
exactly what was meant."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.agent.scripts import plan_reply
from tests.e2e.server import running_server
from tests.fakellm import FakeModelServer

pytestmark = pytest.mark.e2e

ATOM = (
    '<?xml version="1.0"?>\n<feed><entry><content type="html">&lt;p&gt;a &amp; b'
    "</content></entry></feed>\n"
)
FIXTURE = 'TAIL = "</content></write_code>"\nassert 1 < 2 and 3 > 2  # ]]> &amp;\n'
SHELL = "set -e\ncat <<'X' > gen.txt\nx && y < z\nX\n"
NO_NEWLINE = "line one\r\nline two without final newline"
QWEN_PY = 'if a < b and c > d:\n    print("&lt; stays &lt;")\n'
FENCED_PY = 'print("fenced & fine")\n'
INDENTED_PY = "def f():\n    return 'indented < ok'\n\nprint(f())\n"

REPLIES = [
    # canonical, with a file that quotes the protocol's own closing tags
    "I'll write the fixture.\n<write_code>\n<path>fixture.py</path>\n<content>\n"
    + FIXTURE
    + "</content>\n</write_code>",
    # Qwen3-Coder function/parameter dialect, missing final </parameter>
    "<function=write_code>\n<parameter=path>\nqwen.py\n</parameter>\n<parameter=content>\n"
    + QWEN_PY
    + "</parameter>\n</function>",
    # MiniMax-style namespaced wrapper around invoke/parameter
    '<minimax:tool_call>\n<invoke name="write_code">\n<parameter name="path">feed.xml'
    '</parameter>\n<parameter name="content">' + ATOM + "</parameter>\n</invoke>\n"
    "</minimax:tool_call>",
    # JSON tool call in a fence
    "```json\n"
    + json.dumps({"name": "write_code", "arguments": {"path": "crlf.txt", "content": NO_NEWLINE}})
    + "\n```",
    # <tool_call> with JSON inside, and CDATA in the canonical form after it
    '<tool_call>{"name": "write_code", "arguments": {"path": "gen.sh", "content": '
    + json.dumps(SHELL)
    + "}}</tool_call>\n"
    "<write_code><path>cdata.txt</path><content><![CDATA[a ]]]]><![CDATA[> b & <c>]]>"
    "</content></write_code>",
    # reasoning with a draft action that must not run, then the real one
    "<think>maybe <write_code><path>draft.txt</path><content>no</content></write_code></think>"
    "<terminal_run><command>bash gen.sh && cat gen.txt</command></terminal_run>",
    # a lone surrogate escape over the wire is a format error, nothing written
    '{"name": "write_code", "arguments": {"path": "bad.txt", "content": "x\ud800"}}',
    # DeepSeek V3.1 markers; a whole-file fence in a .py and a backticked path
    "<\uff5ctool\u2581call\u2581begin\uff5c>write_code<\uff5ctool\u2581sep\uff5c>"
    + json.dumps({"path": " `fenced.py` ", "content": "```python\n" + FENCED_PY + "```\n"})
    + "<\uff5ctool\u2581call\u2581end\uff5c>",
    # content pretty-printed with the XML's indentation, then an edit-free Mistral v11 call
    "<write_code>\n  <path>indented.py</path>\n  <content>\n"
    + "".join("  " + line + "\n" for line in INDENTED_PY.splitlines())
    + "  </content>\n</write_code>\n"
    + '[TOOL_CALLS]terminal_run[ARGS]{"command": "python3 fenced.py && python3 indented.py"}',
    # Qwen 3.5: <think> never closed, a complete final action
    "<think>\nAll files are there; list them.\n\n<tool_call>\n<function=terminal_run>\n"
    "<parameter=command>\nls\n</parameter>\n</function>\n</tool_call>\n",
]


def test_dialects_drive_a_real_run(tmp_path: Path, fake_model: FakeModelServer) -> None:
    fake_model.script(
        {"stage": "planning", "content": plan_reply("Write the files")},
        *({"stage": "thinking", "content": reply} for reply in REPLIES),
        {
            "stage": "thinking",
            "content": "",
            "finish_reason": "tool_calls",
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "finish", "arguments": '{"message": "all written"}'},
                }
            ],
        },
    )
    with running_server(tmp_path, fake_model.base_url) as server:
        messages, end, headers = server.run({"goal": "write the files", "mode": "agent"})
    assert end["status"] == "completed", [m["content"] for m in messages][-4:]
    (ws,) = (tmp_path / "workspace" / "user_1").iterdir()
    assert ws.name == f"Conversation_{headers['x-conversation-id']}"
    expected = {
        "fixture.py": FIXTURE,
        "qwen.py": QWEN_PY,
        "feed.xml": ATOM,
        "crlf.txt": NO_NEWLINE,
        "gen.sh": SHELL,
        "cdata.txt": "a ]]> b & <c>",
        "gen.txt": "x && y < z\n",
        "fenced.py": FENCED_PY,
        "indented.py": INDENTED_PY,
    }
    assert sorted(p.name for p in ws.iterdir()) == sorted(expected)
    for name, text in expected.items():
        assert (ws / name).read_bytes() == text.encode(), name
    run_result = next(
        m
        for m in messages
        if m["meta"]["action_type"] == "terminal_run" and m["status"] != "running"
    )
    assert "x && y < z" in run_result["content"]
    assert messages[-1]["content"] == "all written"
    results = [
        m["content"]
        for m in messages
        if m["meta"]["action_type"] == "terminal_run" and m["status"] == "success"
    ]
    assert any("fenced & fine" in r and "indented < ok" in r for r in results)
    assert any("indented.py" in r and "fenced.py" in r for r in results)  # the final `ls`
    assert all(
        m["status"] != "running" or m["meta"]["action_type"] == "task" for m in messages[-3:]
    )
