"""edit_file through the pipeline: the edited file counts as changed in finish_summery."""

from __future__ import annotations

from pathlib import Path

from backend.config import Settings
from backend.llm.testing import ScriptedLLM
from tests.agent.scripts import finish, plan_reply, write
from tests.support.asgi import client_for, post_run


def test_edited_file_is_listed_and_edited_byte_exact(settings: Settings, tmp_path: Path) -> None:
    original = "def f():\n    return '<a & b>'\n\nprint(f())\n"
    llm = ScriptedLLM(
        [
            ("planning", plan_reply("Write", "Edit")),
            ("thinking", write("app.py", original) + finish("wrote")),
            (
                "thinking",
                "<edit_file><path>app.py</path><old_str>    return '<a & b>'\n</old_str>"
                '<new_str>    return "</new_str> & ok"\n</new_str></edit_file>' + finish("edited"),
            ),
            ("summary", "Both done."),
        ]
    )
    with client_for(settings, llm) as client:
        messages, end, _ = post_run(client, {"goal": "write then edit", "mode": "agent"})
    assert llm.errors == []
    assert end["status"] == "completed"
    edits = [m for m in messages if m["meta"]["action_type"] == "edit_file"]
    assert [m["status"] for m in edits] == ["running", "success"]
    assert edits[-1]["meta"]["filepath"] == "app.py"
    files = {f["filepath"] for f in messages[-1]["meta"]["json"]}
    assert files == {"app.py"}
    path = next((settings.workspace_dir).rglob("app.py"))
    assert (
        path.read_bytes()
        == original.replace("    return '<a & b>'\n", '    return "</new_str> & ok"\n').encode()
    )
