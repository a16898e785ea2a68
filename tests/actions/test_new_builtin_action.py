"""A new builtin action is one module in backend/actions/registry/builtin/ and nothing else:
written here into a temporary folder that joins the builtin package, the module alone makes
the registry built from that package parse the action, offer it in the prompt, run it, make
it a member of the wire's enumerations and a row of docs/api.md's tables (the committed
TypeScript types and tables then differ: they are regenerated, not edited). The registry
every other test uses never has it (tests/test_the_recipe.py follows the whole recipe of
docs/tools.md in a copy of the tree)."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from backend.actions import parse_actions
from backend.actions.model import Action
from backend.actions.registry import (
    ActionContext,
    ActionDef,
    Registry,
    builtin,
    builtin_registry,
    definitions,
    run_action,
)
from backend.actions.registry.docs import rewrite
from backend.actions.registry.wire import action_types, message_kinds, wire_schema
from backend.agent.prompts import render
from backend.runtime.base import BaseRuntime
from tests.docs_check import API_DOC, action_problems
from tests.support.wire import committed_message_schema

MODULE = '''"""list_dir: the names in a folder of the workspace."""

from pydantic import BaseModel

from backend.actions.model import Action, ActionSpec
from backend.actions.registry.core import ActionContext, ActionDef, Done, Shown


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
    payload=(Listing,),
    shown=Shown(running=lambda a: f"Listing {a.params.get('path', '')}", order=45),
)
'''


@pytest.fixture
def registry(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Registry]:
    """The module, as a newcomer adds it: a file in the builtin package (a folder of it),
    and the registry made from that package now (the process's, made before, is not)."""
    folder = tmp_path / "builtin_more"
    folder.mkdir()
    (folder / "list_dir.py").write_text(MODULE, encoding="utf-8")
    monkeypatch.setattr(builtin, "__path__", [*builtin.__path__, str(folder)])
    yield Registry(definitions(builtin.__name__))
    sys.modules.pop(f"{builtin.__name__}.list_dir", None)


@pytest.fixture
def list_dir_module(registry: Registry) -> ActionDef:
    defn = registry.get("list_dir")
    assert defn is not None
    return defn


async def test_a_module_in_the_builtin_package_is_a_whole_new_action(
    registry: Registry, list_dir_module: ActionDef, tmp_path: Path
) -> None:
    # parsed, in the tag dialect and as a tool call
    vocab = registry.vocabulary
    tag = "<list_dir><path>src</path></list_dir>"
    assert parse_actions(tag, vocab=vocab) == [Action("list_dir", {"path": "src"})]
    call = '{"name": "list_dir", "arguments": {"path": "src"}}'
    assert parse_actions(call, vocab=vocab) == [Action("list_dir", {"path": "src"})]
    aliased = "<list_files><path>src</path></list_files>"  # the name its module also gives
    assert parse_actions(aliased, vocab=vocab) == [Action("list_dir", {"path": "src"})]
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
    listing = Action("list_dir", {"path": "src"})
    done = await run_action(BaseRuntime(), listing, workspace, registry=registry)
    assert (done.status, done.content, done.data) == ("success", "app.py", [{"names": ["app.py"]}])


def test_a_new_action_joins_the_wire_enumerations_and_the_generated_types_drift(
    registry: Registry,
) -> None:
    assert ("LISTING", "listing") in message_kinds(registry).members
    assert ("LIST_DIR", "list_dir") in action_types(registry).members
    schema = wire_schema(registry)
    assert "listing" in schema["$defs"]["MessageKind"]["enum"]
    # what its messages carry in meta.json is its module's model, in the schema
    listing = schema["$defs"]["MetaPayloads"]["properties"]["listing"]
    assert listing["items"] == {"$ref": "#/$defs/Listing"}
    assert schema["$defs"]["Listing"]["properties"]["names"]["type"] == "array"
    # the committed types (and the schema they carry) no longer match: regenerated
    assert committed_message_schema() != schema


def test_the_docs_tables_are_made_anew_with_the_new_actions_rows(registry: Registry) -> None:
    text = API_DOC.read_text(encoding="utf-8")
    assert action_problems(text, registry.defs()) == [
        "list_dir is an action the approval table of docs/api.md does not list"
    ]
    made = rewrite(text, registry)  # what `make frontend-types` writes
    assert "| `read_file`, `list_dir`, `ask_user`, `finish` | none | runs | runs | runs |" in made
    assert "| `listing` | `list_dir` | `path` | Listing |" in made
    assert action_problems(made, registry.defs()) == []


def test_without_the_module_there_is_no_such_action() -> None:
    actions = builtin_registry()
    assert actions.get("list_dir") is None
    assert "list_files" not in actions.vocabulary.aliases
    assert "list_dir" not in [name for _, name in action_types().members]
