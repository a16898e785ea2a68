"""write_code: create or overwrite a workspace file with the exact content."""

from __future__ import annotations

from pydantic import BaseModel, Field

from backend.actions.model import Action, ActionSpec
from backend.actions.registry.core import ActionContext, ActionDef, Done, Handling, Shown

SHOWN_CAP = 20_000  # characters of the written file its card carries (meta.json)


class WrittenFile(BaseModel):
    """``write_code`` (a success): the file and what was written (its head when big)."""

    path: str
    content: str = Field(description=f"At most {SHOWN_CAP:,} characters of what was written.")
    lines: int
    truncated: bool = Field(description="True when content is the file's head only.")


def count_lines(content: str) -> int:
    return content.count("\n") + (1 if content and not content.endswith("\n") else 0)


async def write_code(ctx: ActionContext, action: Action) -> Done:
    p = action.params
    content = p.get("content", "")
    done = Done.of(await ctx.runtime.write_file(ctx.workspace, p.get("path", ""), content))
    if done.ok:  # the card shows what was written (its head when the file is big)
        done.data = [
            WrittenFile(
                path=done.filepath,
                content=content[:SHOWN_CAP],
                lines=count_lines(content),
                truncated=len(content) > SHOWN_CAP,
            )
        ]
    return done


def describe(action: Action) -> str:
    lines = count_lines(action.params.get("content", ""))
    return f"write_code {action.params.get('path', '')} ({lines} lines)"


SHOWN_LINES = 10  # the first lines of a written file `planact run` prints


def show(content: str, data: list[WrittenFile]) -> str:
    """The written file's first lines, numbered, under the result."""
    if not data:
        return ""
    d = data[0]
    text = d.content.rstrip("\n")
    lines = text.split("\n") if text else []
    total = max(d.lines, len(lines))
    head = lines[:SHOWN_LINES]
    width = len(str(len(head)))
    out = [f"{content} ({total} lines)"]
    out += [f"{i:>{width}} {line}" for i, line in enumerate(head, 1)]
    if total > len(head):
        out.append(f"[… {total - len(head)} more lines …]")
    return "\n".join(out)


ACTION = ActionDef(
    spec=ActionSpec(
        name="write_code",
        aliases=("write_file", "create_file"),
        description="Create or overwrite a text file in the workspace with the exact content.",
        required=("path", "content"),
        raw=("content",),
        whole_file="content",
        example="<write_code><path>src/app.py</path><content>\nprint('hi')\n</content></write_code>",
    ),
    kind="write_code",
    handler=write_code,
    payload=(WrittenFile,),
    shown=Shown(
        running=lambda a: f"Writing {a.params.get('path', '')}",
        describe=describe,
        show=show,
        order=10,
    ),
    handling=Handling(
        approval="edits",
        approval_view="diff",
        writes_files=True,
    ),
)
