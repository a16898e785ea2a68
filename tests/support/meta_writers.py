"""Every writer of a message's ``meta.json``, run for real, and what it stored.

:func:`stored_meta` runs the writers: a scripted agent run in-process (the goal's budget, the
plan, its tasks, write_code, edit_file, terminal_run, read_file, finish, the summary's
files), a run that asks the person and then an approval (both answered: the partners copy
the wait's items), a run stopped while it waits for an approval (the run closed from the
store: its task and summary), a summary that lists a running preview, and the tool actions'
handlers against servers on 127.0.0.1 (a search provider, a web site, an SDK-written MCP
server). It gives, per scenario, each
stored message's kind and its ``meta.json`` as the stored JSON text, with what differs from
one run to the next (ids, the temporary folder, ports, the site's nonces) replaced.

tests/messages/test_meta_payloads.py compares it with tests/messages/meta_json.fixture.json,
written by this module from the code before meta.json was typed:

    python -m tests.support.meta_writers > tests/messages/meta_json.fixture.json

It uses nothing but what both versions have (Message, the registry's ``execute``, the run
manager, the waits' answers), so the same module writes the fixture from the old code.
"""

from __future__ import annotations

import asyncio
import json
import re
import sys
import tempfile
from collections import defaultdict, deque
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from backend.actions.model import Action
from backend.actions.registry import ActionContext, builtin_registry
from backend.agent.specialists import BUILTIN
from backend.llm.base import Completion, DeltaCallback
from backend.messages.bus import Bus
from backend.messages.message import Message
from backend.runs import RunManager
from backend.runtime.local import LocalRuntime
from backend.store.repo import Store
from backend.tools.kit import Tools
from backend.tools.mcp import McpManager, parse_servers
from backend.tools.search import SearchConfig, WebSearch
from backend.tools.web import FetchConfig, WebFetch
from backend.waits import answer_approval, answer_question
from tests.agent.scripts import finish, plan_reply, run, write
from tests.support.mcp import stdio
from tests.support.settings import make_settings
from tests.tools.search.fakesearch import FakeSearch
from tests.tools.web.site import Site

Stored = list[tuple[str, str]]  # (kind, meta.json as stored), in stream order

PROGRAM = 'print("a < b && c > d")  # tricky: "quotes" ]]> </content>\nprint(2)\n'
EDIT = (
    "<edit_file><path>app.py</path><old_str>print(2)</old_str>"
    "<new_str>print(3)</new_str></edit_file>"
)
READ = "<read_file><path>app.py</path></read_file>"
ASK = "<ask_user><question>Which greeting?</question></ask_user>"


class StageLLM:
    """Replies queued per stage; the summary always answers."""

    default_model = "scripted/model"

    def __init__(self, **stages: list[str]) -> None:
        self.queues: dict[str, deque[str]] = defaultdict(deque)
        for stage, replies in stages.items():
            self.queues[stage].extend(replies)

    async def complete(
        self,
        *,
        stage: str,
        messages: list[dict[str, Any]],
        model: str | None = None,
        on_delta: DeltaCallback | None = None,
    ) -> Completion:
        if stage == "summary":
            return Completion("Done.", model=self.default_model)
        return Completion(self.queues[stage].popleft(), model=self.default_model)

    async def aclose(self) -> None: ...


def json_text(items: list[Any]) -> str:
    return json.dumps(items, ensure_ascii=False, separators=(",", ":"))


async def _manager(tmp: Path, llm: StageLLM) -> RunManager:
    settings = make_settings(tmp)
    store = Store(settings.database_url)
    store.migrate()
    m = RunManager(settings, store, Bus(), llm, BUILTIN)
    await m.open()
    return m


async def _waiting(m: RunManager, cid: str, kind: str) -> Message:
    """The run's open wait message of ``kind``, once the run is parked on it."""
    for _ in range(3000):
        msgs = await m.store.messages(cid, limit=10_000)
        closed = {x.uuid for x in msgs if x.status != "running"}
        found = [x for x in msgs if x.meta.action_type == kind and x.uuid not in closed]
        run_row = await m.store.get_run(msgs[0].run_id) if msgs else None
        parked = run_row is not None and (run_row.status, run_row.owner) == ("waiting", None)
        if found and parked:
            return found[0]
        await asyncio.sleep(0.01)
    raise AssertionError(f"no {kind} message")


async def _stored(m: RunManager, cid: str, rid: str, tmp: Path) -> Stored:
    out = []
    for msg in await m.store.messages(cid, limit=10_000):
        text = json_text(msg.to_dict()["meta"]["json"])
        out.append((msg.meta.action_type, _same(text, {cid: "<cid>", rid: "<rid>"}, tmp)))
    return out


def _same(text: str, names: dict[str, str], tmp: Path) -> str:
    """``text`` without what differs from one run to the next."""
    for value, name in names.items():
        text = text.replace(value, name)
    text = text.replace(str(tmp), "<tmp>")
    text = re.sub(r'"id":"[0-9a-f]{12}"', '"id":"<task>"', text)  # the plan's task ids
    text = re.sub(r"_[0-9a-f]{8}\.png", "_<random>.png", text)  # an MCP image's file
    text = re.sub(r"\.localhost:\d+", ".localhost:<port>", text)  # a preview's own host
    return re.sub(r"127\.0\.0\.1:\d+", "127.0.0.1:<port>", text)


async def agent_run(tmp: Path) -> Stored:
    llm = StageLLM(
        planning=[plan_reply("Write it", "Break it")],
        thinking=[
            write("app.py", PROGRAM),
            EDIT,
            run("python3 app.py"),
            READ,
            finish("written and run"),
            run("echo out; echo err >&2; exit 3"),
            finish("it failed as asked"),
        ],
    )
    m = await _manager(tmp, llm)
    try:
        cid, rid = await m.start("1", "write app.py", mode="agent")
        assert await m.wait(rid, timeout=60) == "completed"
        return await _stored(m, cid, rid, tmp)
    finally:
        await m.shutdown()
        await m.store.close()


async def answered_waits(tmp: Path) -> Stored:
    llm = StageLLM(
        planning=[plan_reply("Ask, then run")],
        thinking=[ASK, run("echo approved >> log.txt"), finish("ran it")],
    )
    m = await _manager(tmp, llm)
    try:
        cid, rid = await m.start("1", "ask then run", mode="agent", approval="risky")
        asked = await _waiting(m, cid, "ask_user")
        await answer_question(m, rid, asked.uuid, "Hello")
        approval = await _waiting(m, cid, "approval")
        await answer_approval(m, rid, approval.uuid, "approve")
        assert await m.wait(rid, timeout=60) == "completed"
        return await _stored(m, cid, rid, tmp)
    finally:
        await m.shutdown()
        await m.store.close()


async def stopped_while_waiting(tmp: Path) -> Stored:
    llm = StageLLM(
        planning=[plan_reply("Write")],
        thinking=[write("kept.txt", "kept\n"), run("echo never >> log.txt")],
    )
    m = await _manager(tmp, llm)
    try:
        cid, rid = await m.start("1", "write then run", mode="agent", approval="risky")
        await _waiting(m, cid, "approval")
        assert await m.stop(rid)
        assert await m.wait(rid, timeout=60) == "stopped"
        return await _stored(m, cid, rid, tmp)
    finally:
        await m.shutdown()
        await m.store.close()


async def tool_actions(tmp: Path) -> Stored:
    """The tool actions' handlers, their data as a message of their kind carries it."""
    workspace = tmp / "ws"
    workspace.mkdir(parents=True)
    search, site = FakeSearch().start(), Site().start()
    mcp = McpManager(
        parse_servers({"mcpServers": {"files": stdio("tools_server.py")}}),
        call_timeout=30.0,
        start_timeout=30.0,
    )
    tools = Tools(
        search=WebSearch(SearchConfig(provider="searxng", url=search.url, max_results=3)),
        fetch=WebFetch(
            FetchConfig(
                allow_hosts=frozenset({f"127.0.0.1:{site.port}"}), render="never", timeout=10.0
            )
        ),
        mcp=mcp,
    )
    ctx = ActionContext(LocalRuntime(terminal_timeout=0.5), workspace, tools=tools)
    calls = [
        ("search", Action("web_search", {"query": "planact"})),
        ("browser", Action("web_fetch", {"url": site.url + "/r1"})),
        ("browser", Action("web_fetch", {"url": site.url + "/loop-a"})),
        ("mcp_tool", Action("mcp_tool", {"name": "files__report", "arguments": "{}"})),
        ("mcp_tool", Action("mcp_tool", {"name": "files__image", "arguments": ""})),
        ("mcp_tool", Action("mcp_tool", {"name": "files__fail", "arguments": "{not json"})),
        ("mcp_tool", Action("mcp_tool", {"name": "nowhere__x", "arguments": "{}"})),
        ("terminal_run", Action("terminal_run", {"command": "echo started; sleep 30"})),
    ]
    out: Stored = []
    try:
        for kind, action in calls:
            done = await builtin_registry().execute(ctx, action)
            text = json_text(
                Message.build(kind, done.content, json=done.data).to_dict()["meta"]["json"]
            )
            names = {site.nonce: "<nonce>", site.script_nonce: "<script-nonce>"}
            out.append((kind, _same(text, names, tmp)))
    finally:
        await mcp.aclose()
        search.stop()
        site.stop()
    return out


async def summary_with_preview(tmp: Path) -> Stored:
    """A run's summary in a conversation with a running preview (its row as the host stores
    it, hosted by this manager's process): the summary lists it after the files."""
    llm = StageLLM(planning=[plan_reply("Note it")], thinking=[finish("noted")])
    m = await _manager(tmp, llm)
    try:
        cid = await m.store.create_conversation("1", "previewed")
        now = datetime.now(UTC)
        await m.store.put_preview(
            {
                "conversation_id": cid,
                "user_id": "1",
                "kind": "service",
                "name": "app",
                "port": 8080,
                "path": "/docs/",
                "command": "python3 -m http.server 8080",
                "runtime": "local",
                "state": "ready",
                "owner": m.instance_id,
                "socket": "",
                "token": "t" * 32,
                "token_expires": now + timedelta(hours=1),
                "started_at": now,
                "last_request_at": now,
                "stop_requested": False,
                "log": [],
            }
        )
        _, rid = await m.start("1", "note it", conversation_id=cid, mode="agent")
        assert await m.wait(rid, timeout=60) == "completed"
        return await _stored(m, cid, rid, tmp)
    finally:
        await m.shutdown()
        await m.store.close()


SCENARIOS = {
    "agent_run": agent_run,
    "answered_waits": answered_waits,
    "stopped_while_waiting": stopped_while_waiting,
    "tool_actions": tool_actions,
    "summary_with_preview": summary_with_preview,
}


async def stored_meta(tmp: Path) -> dict[str, Stored]:
    out = {}
    for name, scenario in SCENARIOS.items():
        folder = tmp / name
        folder.mkdir()
        out[name] = await scenario(folder)
    return out


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        got = asyncio.run(stored_meta(Path(tmp)))
    sys.stdout.write(json.dumps(got, indent=1, ensure_ascii=False) + "\n")


if __name__ == "__main__":
    main()
