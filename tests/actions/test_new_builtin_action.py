"""A new builtin action is one module in backend/actions/registry/builtin/ and nothing else:
written here into a temporary folder that joins the builtin package, the module alone makes
the action parsed, offered in the prompt, run, a member of the wire's enumerations (the
committed TypeScript types then differ: they are regenerated, not edited) and a row the
docs check asks docs/api.md for."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from backend.actions import parse_actions, registry
from backend.actions.model import ACTION_ALIASES, Action
from backend.actions.registry import ActionContext, ActionDef, builtin, run_action
from backend.actions.registry.wire import action_types, message_kinds, wire_schema
from backend.agent.prompts import render
from backend.messages.schema import dumps
from backend.runtime.base import BaseRuntime
from tests.docs_check import API_DOC, action_problems

SCHEMA = Path(__file__).resolve().parents[2] / "frontend" / "src" / "lib" / "message.schema.json"
MODULE = '''"""list_dir: the names in a folder of the workspace."""

from pydantic import BaseModel

from backend.actions.model import Action, ActionSpec
from backend.actions.registry.core import ActionContext, ActionDef, Done


class Listing(BaseModel):
    """What a ``listing`` message carries in meta.json."""

    names: list[str]


async def list_dir(ctx: ActionContext, action: Action) -> Done:
    folder = ctx.workspace / action.params.get("path", ".")
    names = sorted(p.name + ("/" if p.is_dir() else "") for p in folder.iterdir())
    return Done("success", "\\n".join(names), data=[Listing(names=names)])


ACTION = ActionDef(
    spec=ActionSpec(
        name="list_dir",
        description="List the files and folders of a workspace folder.",
        aliases=("list_files",),
        required=("path",),
        example="<list_dir><path>src</path></list_dir>",
    ),
    kind="listing",
    handler=list_dir,
    running=lambda a: f"Listing {a.params.get('path', '')}",
    payload=(Listing,),
    order=45,
)
'''


@pytest.fixture
def list_dir_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[ActionDef]:
    """The module, as a newcomer adds it: a file in the builtin package (a folder of it)."""
    folder = tmp_path / "builtin_more"
    folder.mkdir()
    (folder / "list_dir.py").write_text(MODULE, encoding="utf-8")
    monkeypatch.setattr(builtin, "__path__", [*builtin.__path__, str(folder)])
    registry.load_builtin()
    defn = registry.get("list_dir")
    assert defn is not None
    yield defn
    registry.unregister("list_dir")
    sys.modules.pop(f"{builtin.__name__}.list_dir", None)


async def test_a_module_in_the_builtin_package_is_a_whole_new_action(
    list_dir_module: ActionDef, tmp_path: Path
) -> None:
    assert registry.get("list_dir") is list_dir_module
    # parsed, in the tag dialect and as a tool call
    tag = "<list_dir><path>src</path></list_dir>"
    assert parse_actions(tag) == [Action("list_dir", {"path": "src"})]
    call = '{"name": "list_dir", "arguments": {"path": "src"}}'
    assert parse_actions(call) == [Action("list_dir", {"path": "src"})]
    aliased = "<list_files><path>src</path></list_files>"  # the name its module also gives
    assert parse_actions(aliased) == [Action("list_dir", {"path": "src"})]
    # offered: the task loop's prompt lists it, in its place (after terminal_run's 30)
    workspace = tmp_path / "ws"
    (workspace / "src").mkdir(parents=True)
    (workspace / "src" / "app.py").write_text("print(1)\n")
    ctx = ActionContext(BaseRuntime(), workspace)
    specs = [d.spec for d, offer in await registry.offered(ctx) if offer.available]
    prompt = render("thinking", actions=specs, tool_notes=[], workspace_note="", timeout=1)
    assert "<list_dir> — List the files and folders of a workspace folder." in prompt
    assert prompt.index("<list_dir>") > prompt.index("<terminal_run>")
    # run through the registry like any action
    done = await run_action(BaseRuntime(), Action("list_dir", {"path": "src"}), workspace)
    assert (done.status, done.content, done.data) == ("success", "app.py", [{"names": ["app.py"]}])


def test_a_new_action_joins_the_wire_enumerations_and_the_generated_types_drift(
    list_dir_module: ActionDef,
) -> None:
    assert ("LISTING", "listing") in message_kinds().members
    assert ("LIST_DIR", "list_dir") in action_types().members
    schema = wire_schema()
    assert "listing" in schema["$defs"]["MessageKind"]["enum"]
    # what its messages carry in meta.json is its module's model, in the schema
    listing = schema["$defs"]["MetaPayloads"]["properties"]["listing"]
    assert listing["items"] == {"$ref": "#/$defs/Listing"}
    assert schema["$defs"]["Listing"]["properties"]["names"]["type"] == "array"
    # the committed schema (and the TypeScript made of it) no longer match: regenerated
    assert SCHEMA.read_text(encoding="utf-8") != dumps(schema)


def test_the_docs_check_asks_for_the_new_actions_row(list_dir_module: ActionDef) -> None:
    text = API_DOC.read_text(encoding="utf-8")
    assert action_problems(text, registry.defs()) == [
        "list_dir is an action the approval table of docs/api.md does not list"
    ]
    row = "| `read_file`, `finish`, `ask_user` | none | runs | runs | runs |"
    documented = text.replace(row, row + "\n| `list_dir` | none | runs | runs | runs |")
    assert action_problems(documented, registry.defs()) == []


def test_without_the_module_there_is_no_such_action() -> None:
    assert registry.get("list_dir") is None
    assert "list_files" not in ACTION_ALIASES
    assert "list_dir" not in [name for _, name in action_types().members]
