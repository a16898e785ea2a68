"""How tool results show outside the web UI: `planact run` lines and LemonAI action types."""

from __future__ import annotations

from backend.actions import builtin_registry
from backend.cli.progress import Progress
from backend.lemonai.translate import translate_all
from backend.messages.message import Message

REGISTRY = builtin_registry()


def lines_for(msg: Message) -> list[str]:
    out: list[str] = []
    Progress(REGISTRY, out.append).message(msg)
    return out


def test_planact_run_prints_search_results_as_title_and_url_lines() -> None:
    hits = [
        {"title": "One", "url": "https://example.org/1", "snippet": "s"},
        {"title": "Two", "url": "https://example.org/2", "snippet": "s"},
    ]
    msg = Message.build("search", "Results for 'q': …", json=hits)
    assert lines_for(msg) == [
        "[search ok] One\n      https://example.org/1\n    Two\n      https://example.org/2"
    ]


def test_planact_run_prints_a_page_title_and_its_first_lines() -> None:
    page = {"url": "http://site/", "title": "Nonce Page", "markdown": "# Hi\n\n" + "line\n" * 20}
    (line,) = lines_for(Message.build("browser", "long text", json=[page]))
    assert line.startswith("[browser ok] Nonce Page <http://site/>\n    # Hi\n    line")
    assert line.count("line") == 7  # the first lines only


def test_planact_run_prints_an_mcp_call_with_its_arguments_and_result() -> None:
    call = {"name": "calc__add", "arguments": {"a": 2}, "parts": []}
    (line,) = lines_for(Message.build("mcp_tool", "42.0", json=[call]))
    assert line == '[mcp_tool ok] calc__add {"a": 2}\n    42.0'


def test_a_failed_tool_action_is_printed_whole_like_any_failure() -> None:
    msg = Message.build("search", "Web search failed: 429", status="failure", json=[])
    assert lines_for(msg) == ["[search FAIL] Web search failed: 429"]


def test_lemonai_gets_its_own_action_types_for_the_tools() -> None:
    msgs = [
        Message.build(kind, "x", status="success", json=[])
        for kind in ("search", "browser", "mcp_tool", "edit_file")
    ]
    for i, m in enumerate(msgs):
        m.seq, m.run_id = i + 1, "r"
    out = translate_all(msgs, lambda p: p, REGISTRY)
    assert [m["meta"]["action_type"] for m in out] == [
        "search",
        "browser",
        "mcp_tool",
        "write_code",
    ]
