"""write_code: create or overwrite a workspace file with the exact content."""

from __future__ import annotations

from backend.actions.model import Action, ActionSpec
from backend.actions.registry.core import ActionContext, ActionDef, Done
from backend.messages.kinds import ActionType, MessageKind


async def write_code(ctx: ActionContext, action: Action) -> Done:
    p = action.params
    return Done.of(
        await ctx.runtime.write_file(ctx.workspace, p.get("path", ""), p.get("content", ""))
    )


def describe(action: Action) -> str:
    content = action.params.get("content", "")
    lines = content.count("\n") + (1 if content and not content.endswith("\n") else 0)
    return f"write_code {action.params.get('path', '')} ({lines} lines)"


ACTION = ActionDef(
    spec=ActionSpec(
        name=ActionType.WRITE_CODE,
        description="Create or overwrite a text file in the workspace with the exact content.",
        required=("path", "content"),
        raw=("content",),
        example="<write_code><path>src/app.py</path><content>\nprint('hi')\n</content></write_code>",
    ),
    kind=MessageKind.WRITE_CODE,
    handler=write_code,
    approval="edits",
    running=lambda a: f"Writing {a.params.get('path', '')}",
    describe=describe,
    writes_files=True,
    order=10,
)
