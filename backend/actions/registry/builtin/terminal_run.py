"""terminal_run: a shell command in the workspace, its output streamed live."""

from __future__ import annotations

from pydantic import BaseModel, Field

from backend.actions.model import Action, ActionSpec
from backend.actions.registry.core import (
    ActionContext,
    ActionDef,
    Done,
    Handling,
    Shown,
    brief,
    fold,
)


class CommandRun(BaseModel):
    """``terminal_run``: the command, its exit code and its (capped) output."""

    command: str
    exit_code: int | None = Field(description="None when the timeout killed it.")
    stdout: str
    stderr: str
    timed_out: bool
    note: str = Field(description="Why a limit stopped it, a backend's remark; or empty.")


async def terminal_run(ctx: ActionContext, action: Action) -> Done:
    p = action.params
    result = await ctx.runtime.run_command(
        ctx.workspace, p.get("command", ""), p.get("cwd"), ctx.on_output
    )
    return Done.of(result, CommandRun)


def describe(action: Action) -> str:
    p = action.params
    cwd = f" in {p['cwd']}" if p.get("cwd") else ""
    return f"terminal_run `{brief(p.get('command', ''), 200)}`{cwd}"


SHOWN_LINES = 20  # the last lines of each stream `planact run` prints


def show(content: str, data: list[CommandRun]) -> str:
    """The command as a terminal shows it: `$ command`, its exit code, then its output
    (``|`` stdout, ``!`` stderr, the last lines of each)."""
    if not data:
        return ""  # e.g. cut short by a stop: printed as its content
    d = data[0]
    badge = "timed out" if d.timed_out else f"exit {d.exit_code}"
    lines = [f"$ {d.command}  [{badge}]"]
    for output, mark in ((d.stdout, "|"), (d.stderr, "!")):
        text = output.rstrip("\n")
        if text:
            lines += [f"{mark} {line}" for line in fold(text.split("\n"), SHOWN_LINES, tail=True)]
    if d.timed_out:
        lines.append(content.split("\n", 1)[0])  # how long it ran, what to do instead
    if d.note:
        lines.append(d.note)
    return "\n".join(lines)


ACTION = ActionDef(
    spec=ActionSpec(
        name="terminal_run",
        aliases=(
            "run_command",
            "execute_command",
            "run_terminal_cmd",
            "run_shell_command",
            "execute_bash",
            "bash",
            "shell",
        ),
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
    kind="terminal_run",
    handler=terminal_run,
    payload=(CommandRun,),
    shown=Shown(
        label=lambda a: f"terminal_run: {a.params.get('command', '')[:200]}",
        running=lambda a: a.params.get("command", ""),
        describe=describe,
        show=show,
        shows_failure=True,
        order=30,
    ),
    handling=Handling(
        approval="terminal",
        approval_view="command",
        streams_output=True,
        output_is_result=True,
    ),
)
