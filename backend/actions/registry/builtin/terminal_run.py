"""terminal_run: a shell command in the workspace, its output streamed live."""

from __future__ import annotations

from backend.actions.model import Action, ActionSpec
from backend.actions.registry.core import ActionContext, ActionDef, Done, brief
from backend.messages.kinds import ActionType, MessageKind


async def terminal_run(ctx: ActionContext, action: Action) -> Done:
    p = action.params
    result = await ctx.runtime.run_command(
        ctx.workspace, p.get("command", ""), p.get("cwd"), ctx.on_output
    )
    return Done.of(result)


def describe(action: Action) -> str:
    p = action.params
    cwd = f" in {p['cwd']}" if p.get("cwd") else ""
    return f"terminal_run `{brief(p.get('command', ''), 200)}`{cwd}"


ACTION = ActionDef(
    spec=ActionSpec(
        name=ActionType.TERMINAL_RUN,
        description=(
            "Run a shell command in the workspace (or in cwd, relative to it). "
            "Returns the exit code, stdout and stderr. Long-running servers are killed "
            "after the timeout: never start one in the foreground."
        ),
        required=("command",),
        optional=("cwd",),
        raw=("command",),
        example="<terminal_run><command>python3 src/app.py</command><cwd>.</cwd></terminal_run>",
    ),
    kind=MessageKind.TERMINAL_RUN,
    handler=terminal_run,
    approval="terminal",
    label=lambda a: f"terminal_run: {a.params.get('command', '')[:200]}",
    running=lambda a: a.params.get("command", ""),
    describe=describe,
    streams_output=True,
    order=30,
)
