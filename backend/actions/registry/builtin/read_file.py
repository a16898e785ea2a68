"""read_file: a workspace file's text."""

from __future__ import annotations

from backend.actions.model import Action, ActionSpec
from backend.actions.registry.core import ActionContext, ActionDef, Done, Handling, Shown


async def read_file(ctx: ActionContext, action: Action) -> Done:
    return Done.of(await ctx.runtime.read_file(ctx.workspace, action.params.get("path", "")))


ACTION = ActionDef(
    spec=ActionSpec(
        name="read_file",
        description="Read a text file from the workspace.",
        required=("path",),
        example="<read_file><path>src/app.py</path></read_file>",
    ),
    kind="read_file",
    handler=read_file,
    shown=Shown(
        running=lambda a: f"Reading {a.params.get('path', '')}",
        describe=lambda a: f"read_file {a.params.get('path', '')}",
        order=40,
    ),
    handling=Handling(rereadable=True),
)
