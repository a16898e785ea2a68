"""A turn's finished tool actions are matched by their stream kind when its owner dies: a
web_search (messages of kind `search`), a web_fetch (`browser`) and an MCP call that had
finished are read back from their stored results on resume, never run again, while the
command that was running when the owner died is closed as interrupted (docs/api.md "The
stream": a run whose process died)."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from backend.agent.resume import INTERRUPTED_ACTION
from backend.llm.base import Completion, DeltaCallback
from backend.runs import RunManager
from tests.agent.scripts import finish, plan_reply, run
from tests.support.mcp import stdio
from tests.support.runs import DEADLINE, ReactiveLLM, a_process, bury, close, kill
from tests.tools.search.fakesearch import FakeSearch
from tests.tools.web.site import Site

QUERY = "planact resume"
STARTED = "started.txt"  # the command's first step: the owner dies while it runs


class ToolsLLM(ReactiveLLM):
    """One task: the model searches, reads a page and calls an MCP tool, then runs a
    command that lasts (the owner dies under it). It finishes once it has read all three
    results; a result it did not read (not run, or not matched) it asks for again."""

    def __init__(self, page: str, nonce: str, tally: Path) -> None:
        super().__init__()
        self.tools = (
            f"<web_search><query>{QUERY}</query></web_search>"
            f"<web_fetch><url>{page}</url></web_fetch>"
            "<mcp_tool><name>tools__tally</name>"
            f"<arguments>{json.dumps({'path': str(tally)})}</arguments></mcp_tool>"
        )
        self.read = ("Result 1", nonce, "tally ")

    async def complete(
        self,
        *,
        stage: str,
        messages: list[dict[str, Any]],
        model: str | None = None,
        on_delta: DeltaCallback | None = None,
    ) -> Completion:
        self.calls.append((stage, [dict(m) for m in messages]))
        if stage == "planning":
            reply = plan_reply("One")
        elif stage == "thinking" and len(messages) == 2:
            reply = self.tools + run(f"touch {STARTED} && sleep 600")
        elif stage == "thinking":
            seen = messages[-1]["content"]
            reply = finish("read them") if all(r in seen for r in self.read) else self.tools
        elif stage == "summary":
            reply = "Done."
        else:
            raise AssertionError(f"unexpected stage {stage}")
        return Completion(reply, model=self.default_model, prompt_tokens=10, completion_tokens=5)


@pytest.fixture
def searx() -> Iterator[FakeSearch]:
    fake = FakeSearch().start()
    yield fake
    fake.stop()


@pytest.fixture
def site() -> Iterator[Site]:
    s = Site().start()
    yield s
    s.stop()


async def _started(owner: RunManager, cid: str) -> None:
    """The command runs (its file is there): waited on through the workspace."""
    marker = owner.workspace("1", cid) / STARTED
    end = time.monotonic() + DEADLINE
    while not marker.exists():
        assert time.monotonic() < end, "the command never started"
        await asyncio.sleep(0.02)


async def test_finished_tool_actions_are_matched_by_kind_and_not_run_again_on_resume(
    tmp_path: Path, db_url: str, searx: FakeSearch, site: Site
) -> None:
    servers = tmp_path / "mcp.json"
    servers.write_text(json.dumps({"mcpServers": {"tools": stdio("tools_server.py")}}))
    tally = tmp_path / "tally.txt"
    llm = ToolsLLM(f"{site.url}/", site.nonce, tally)
    tools = {
        "search_provider": "searxng",
        "search_url": searx.url,
        "web_allow_hosts": f"127.0.0.1:{site.port}",
        "web_render": "never",
        "mcp_servers_file": servers,
    }
    owner = await a_process(tmp_path, db_url, llm, **tools)
    taker = None
    try:
        cid, rid = await owner.start("1", "look things up", mode="agent")
        await _started(owner, cid)
        kill(owner, rid)  # dies while the command runs, the three tools done
        task = owner.runs.task(rid)
        assert task is not None
        task.cancel()
        await asyncio.wait({task}, timeout=DEADLINE)
        await bury(owner, db_url)
        taker = await a_process(tmp_path, db_url, llm, **tools)
        await taker.recover()  # (its lease keeper may have taken it over first)
        assert await taker.wait(rid, timeout=DEADLINE) == "completed"
        msgs = await taker.store.messages(cid, limit=10_000)
        row = await taker.store.get_run(rid)
        assert row is not None and row.resumes == 1
    finally:
        if taker is not None:
            await close(taker)
        await close(owner)
    # each tool ran once: the search provider, the page and the MCP server saw one call
    assert len(searx.requests) == 1
    assert site.paths.count("/") == 1
    assert tally.read_text().count("called") == 1
    # the model read their results from the stored messages, each under its own label
    thinking = [m for stage, m in llm.calls if stage == "thinking"]
    assert len(thinking) == 2
    seen = thinking[1][-1]["content"]
    assert f"[web_search: {QUERY}] ok\n" in seen and "Result 1" in seen
    assert f"[web_fetch {site.url}/] ok\n" in seen and site.nonce in seen
    assert "[mcp_tool tools__tally] ok\ntally 1" in seen
    assert "] FAILED\n" + INTERRUPTED_ACTION in seen  # the command: closed, not run again
    finals = {m.meta.action_type: m.status for m in msgs if m.status != "running"}
    assert {k: finals[k] for k in ("search", "browser", "mcp_tool", "terminal_run")} == {
        "search": "success",
        "browser": "success",
        "mcp_tool": "success",
        "terminal_run": "failure",
    }
