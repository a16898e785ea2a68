"""Adding an action is adding one module: defined here, in this test (a module with an
``ACTION``, as ACTION_MODULES names it), a new action is parsed, offered in the prompt,
executed, shown in the stream with its kind, printed by `planact run` and translated for
LemonAI, with no other file touched; and the builtin registry never sees it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pydantic import BaseModel

from backend.actions import FormatError, parse_actions
from backend.actions.model import Action, ActionSpec
from backend.actions.registry import (
    ActionContext,
    ActionDef,
    ActionModuleError,
    Done,
    Handling,
    Registry,
    Shown,
    builtin_registry,
    load,
)
from backend.cli.progress import Progress
from backend.config import Settings
from backend.lemonai.translate import translate_all
from backend.llm.testing import ScriptedLLM
from backend.messages.message import Message
from tests.agent.scripts import finish, plan_reply
from tests.support.asgi import client_for, post_run


# ---- the new action's module, as a newcomer writes it ----------------------------------
class Shouted(BaseModel):
    """What a ``shout`` message carries in meta.json."""

    said: str


async def shout(ctx: ActionContext, action: Action) -> Done:
    text = action.params.get("text", "")
    ctx.workspace.mkdir(parents=True, exist_ok=True)
    (ctx.workspace / "shouted.txt").write_text(text.upper())
    return Done("success", text.upper(), filepath="shouted.txt", data=[Shouted(said=text)])


SHOUT = ActionDef(
    spec=ActionSpec(
        name="shout",
        description="Say a text loudly (into shouted.txt).",
        required=("text",),
        example="<shout><text>hello</text></shout>",
    ),
    kind="shout",
    handler=shout,
    payload=(Shouted,),
    shown=Shown(
        running=lambda a: f"Shouting {a.params.get('text', '')}",
        show=lambda content, data: f"loudly: {content} (from {data[0].said!r})",
    ),
    handling=Handling(approval="edits"),
)
ACTION = SHOUT  # what ACTION_MODULES reads of a module
# -----------------------------------------------------------------------------------------

registry = builtin_registry()


def test_an_added_action_parses_in_the_dialects_of_its_registry_only() -> None:
    mine = registry.with_actions(SHOUT)
    vocab = mine.vocabulary
    got = parse_actions("<shout><text>hi</text></shout>", vocab=vocab)
    assert got == [Action("shout", {"text": "hi"})]
    qwen = "<function=shout><parameter=text>hi there</parameter></function>"
    assert parse_actions(qwen, vocab=vocab) == [Action("shout", {"text": "hi there"})]
    call = '{"name": "shout", "arguments": {"text": "json"}}'
    assert parse_actions(call, vocab=vocab) == [Action("shout", {"text": "json"})]
    # the builtin registry (every other test's) never had it
    assert registry.get("shout") is None and builtin_registry().get("shout") is None
    with pytest.raises(FormatError):
        parse_actions("<shout><text>hi</text></shout>")


def test_a_registry_without_an_action_leaves_the_builtin_one_whole() -> None:
    fewer = registry.without("read_file")
    with pytest.raises(FormatError, match=r"Unknown action|no action"):
        parse_actions("<read_file><path>a</path></read_file>", vocab=fewer.vocabulary)
    assert fewer.get("read_file") is None
    assert builtin_registry().get("read_file") is not None
    assert parse_actions("<read_file><path>a</path></read_file>") == [
        Action("read_file", {"path": "a"})
    ]


def test_two_actions_of_one_name_or_alias_are_refused_by_name() -> None:
    with pytest.raises(ValueError, match="two actions are named 'shout'"):
        Registry([SHOUT, SHOUT])
    rival = ActionDef(
        spec=ActionSpec(name="yell", description="", required=(), aliases=("bash",)),
        kind="yell",
        handler=shout,
    )
    with pytest.raises(ValueError, match="yell's alias 'bash' is already terminal_run's"):
        registry.with_actions(rival)


def test_action_modules_that_cannot_be_read_are_named() -> None:
    with pytest.raises(ActionModuleError, match=r"'no\.such\.module' cannot be imported"):
        load("no.such.module")
    with pytest.raises(ActionModuleError, match="'json' defines no action"):
        load("json")
    assert load(__name__).get("shout") is SHOUT


def test_a_registered_action_is_offered_run_shown_printed_and_translated(
    settings: Settings, tmp_path: Path
) -> None:
    settings.action_modules = __name__  # a deployment's own action: this module's ACTION
    llm = ScriptedLLM(
        [
            ("planning", plan_reply("Shout")),
            ("thinking", "<shout><text>hello</text></shout>" + finish("shouted")),
            ("summary", "Shouted."),
        ]
    )
    with client_for(settings, llm) as client:
        messages, end, _ = post_run(client, {"goal": "shout hello", "mode": "agent"})
        actions = client.app.state.manager.actions  # type: ignore[attr-defined]
        document = client.get("/api/openapi.json").json()
    # the API's own description names it (its name and kind, what it carries)
    schemas = document["components"]["schemas"]
    assert "shout" in schemas["ActionType"]["enum"] and "shout" in schemas["MessageKind"]["enum"]
    assert "Shouted" in schemas
    assert llm.errors == [] and end["status"] == "completed"
    # offered: the prompt lists it with its description and example
    system = next(c for c in llm.calls if c.stage == "thinking").messages[0]["content"]
    assert "<shout> — Say a text loudly" in system and SHOUT.spec.example in system
    # executed and shown with its kind, its running text and its data
    shouts = [m for m in messages if m["meta"]["action_type"] == "shout"]
    assert [m["status"] for m in shouts] == ["running", "success"]
    assert shouts[0]["content"] == "Shouting hello"
    assert shouts[1]["content"] == "HELLO"
    assert shouts[1]["meta"]["json"] == [{"said": "hello"}]
    assert shouts[1]["meta"]["filepath"] == "shouted.txt"
    path = next(settings.workspace_dir.rglob("shouted.txt"))
    assert path.read_text() == "HELLO"
    # printed by `planact run` as its module says
    lines: list[str] = []
    Progress(actions, lines.append).message(Message.from_dict(shouts[1]))
    assert lines == ["[shout ok] loudly: HELLO (from 'hello')"]
    # translated for LemonAI: an action chip of its own type, the file as its path
    stored = [Message.from_dict(m) for m in messages]
    lemon = translate_all(stored, lambda p: f"/abs/{p}", actions)
    chips = [m for m in lemon if m["meta"]["action_type"] == "shout"]
    assert [m["status"] for m in chips] == ["running", "success"]
    assert chips[1]["meta"]["filepath"] == "/abs/shouted.txt"


def test_each_builtin_action_declares_its_approval_class_and_stream_kind() -> None:
    table = {d.name: (d.handling.approval, d.kind) for d in registry.defs()}
    assert table["write_code"] == ("edits", "write_code")
    assert table["edit_file"] == ("edits", "edit_file")
    assert table["terminal_run"] == ("terminal", "terminal_run")
    assert table["read_file"] == (None, "read_file")
    assert table["finish"] == (None, "finish")
    assert table["web_search"] == ("web", "search")
    assert table["web_fetch"] == ("web", "browser")
    assert table["mcp_tool"] == ("mcp", "mcp_tool")
    assert table["preview"] == ("terminal", "preview")  # a command: approved as one


def test_preview_parses_in_every_dialect() -> None:
    want = [Action("preview", {"port": "8080", "command": "python3 app.py 8080 && echo 'a<b'"})]
    tag = "<preview><port>8080</port><command>python3 app.py 8080 && echo 'a<b'</command></preview>"
    assert parse_actions(tag) == want
    qwen = (
        "<function=preview><parameter=port>8080</parameter>"
        "<parameter=command>python3 app.py 8080 && echo 'a<b'</parameter></function>"
    )
    assert parse_actions(qwen) == want
    args = {"port": 8080, "command": "python3 app.py 8080 && echo 'a<b'"}
    call = json.dumps({"name": "preview", "arguments": args})
    assert parse_actions(call) == want
    invoke = (
        '<invoke name="preview"><parameter name="port">8080</parameter>'
        "<parameter name=\"command\">python3 app.py 8080 && echo 'a<b'</parameter></invoke>"
    )
    assert parse_actions(invoke) == want
