"""edit_file: replace one exact occurrence of a text in a workspace file."""

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


class FileEdit(BaseModel):
    """``edit_file`` (a success): the file and the change as a unified diff."""

    path: str
    diff: str = Field(description="A unified diff of the change.")


async def edit_file(ctx: ActionContext, action: Action) -> Done:
    p = action.params
    result = await ctx.runtime.edit_file(
        ctx.workspace, p.get("path", ""), p.get("old_str", ""), p.get("new_str", "")
    )
    return Done.of(result, FileEdit)


SHOWN_LINES = 40  # lines of the diff `planact run` prints


def show(content: str, data: list[FileEdit]) -> str:
    """The result, then the change as a unified diff."""
    diff = data[0].diff.rstrip("\n") if data else ""
    if not diff:
        return ""
    return "\n".join([content, *fold(diff.split("\n"), SHOWN_LINES)])


ACTION = ActionDef(
    spec=ActionSpec(
        name="edit_file",
        aliases=("str_replace", "replace_in_file", "edit"),
        description=(
            "Replace one exact occurrence of old_str in an existing file with new_str "
            "(old_str must match the file exactly, whitespace included, and occur once; "
            "new_str may be empty). Cheaper than rewriting a big file."
        ),
        required=("path", "old_str", "new_str"),
        raw=("old_str", "new_str"),
        example=(
            "<edit_file><path>src/app.py</path><old_str>print('hi')</old_str>"
            "<new_str>print('hello')</new_str></edit_file>"
        ),
    ),
    kind="edit_file",
    handler=edit_file,
    payload=(FileEdit,),
    shown=Shown(
        running=lambda a: f"Editing {a.params.get('path', '')}",
        describe=lambda a: (
            f"edit_file {a.params.get('path', '')} "
            f"(replaced {brief(a.params.get('old_str', ''), 60)!r})"
        ),
        show=show,
        lemonai="write_code",  # LemonAI has no edit chip: an edit shows as a write
        order=20,
    ),
    handling=Handling(
        approval="edits",
        approval_view="diff",
        writes_files=True,
    ),
)
