"""What a person is shown before approving an edit: the diff against the file on disk,
read confined to the workspace."""

from __future__ import annotations

from pathlib import Path

from backend.actions.model import Action
from backend.agent.asking import approval_content


async def test_an_edit_is_shown_as_a_diff_against_the_file_on_disk(tmp_path: Path) -> None:
    (tmp_path / "app.py").write_text("import os\nprint(1)\n")
    action = Action("edit_file", {"path": "app.py", "old_str": "print(1)", "new_str": "print(2)"})
    content, path = await approval_content(tmp_path, action)
    assert path == "app.py"
    assert "-print(1)\n+print(2)\n" in content
    assert content.startswith("--- a/app.py\n+++ b/app.py\n")


async def test_a_symlink_out_of_the_workspace_shows_nothing_of_the_outside_file(
    tmp_path: Path,
) -> None:
    ws, secret = tmp_path / "ws", tmp_path / "secret.txt"
    ws.mkdir()
    secret.write_text("TOP-SECRET-LINE\n")
    (ws / "notes.txt").symlink_to(secret)
    action = Action("write_code", {"path": "notes.txt", "content": "mine\n"})
    content, _ = await approval_content(ws, action)
    assert "TOP-SECRET" not in content
    assert "+mine\n" in content
