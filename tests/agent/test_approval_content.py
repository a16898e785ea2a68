"""What a person is shown before approving: the whole command; for an edit the diff against
the file on disk, read confined to the workspace, or a plain note of what was left out; and
the check that what runs is what was approved (its digest)."""

from __future__ import annotations

from pathlib import Path

from backend.actions import builtin_registry
from backend.actions.model import Action
from backend.agent.asking import CONTENT_CAP, approval_content, approved_as_shown
from backend.messages.payloads import ApprovalShown
from backend.store.parked import WaitAnswer
from backend.waits.digest import action_digest, canonical

REGISTRY = builtin_registry()


async def test_an_edit_is_shown_as_a_diff_against_the_file_on_disk(tmp_path: Path) -> None:
    (tmp_path / "app.py").write_text("import os\nprint(1)\n")
    action = Action("edit_file", {"path": "app.py", "old_str": "print(1)", "new_str": "print(2)"})
    content, path, about = await approval_content(tmp_path, action, REGISTRY.get(action.type))
    assert path == "app.py"
    assert "-print(1)\n+print(2)\n" in content
    assert content.startswith("--- a/app.py\n+++ b/app.py\n")
    assert about.whole is True and about.note == ""


async def test_a_symlink_out_of_the_workspace_shows_nothing_of_the_outside_file(
    tmp_path: Path,
) -> None:
    ws, secret = tmp_path / "ws", tmp_path / "secret.txt"
    ws.mkdir()
    secret.write_text("TOP-SECRET-LINE\n")
    (ws / "notes.txt").symlink_to(secret)
    action = Action("write_code", {"path": "notes.txt", "content": "mine\n"})
    content, _, _ = await approval_content(ws, action, REGISTRY.get(action.type))
    assert "TOP-SECRET" not in content
    assert "+mine\n" in content


async def test_a_command_is_shown_whole_however_long(tmp_path: Path) -> None:
    command = "echo " + "a" * (CONTENT_CAP * 2) + "\n" * 3 + "touch TAIL"
    content, _, about = await approval_content(
        tmp_path, Action("terminal_run", {"command": command}), REGISTRY.get("terminal_run")
    )
    assert content == command
    assert about == ApprovalShown(whole=True, note="", lines=4, chars=len(command))


async def test_one_huge_line_is_cut_with_a_note_of_how_much(tmp_path: Path) -> None:
    line = "x" * (CONTENT_CAP * 2)
    action = Action("write_code", {"path": "one.txt", "content": line})
    content, _, about = await approval_content(tmp_path, action, REGISTRY.get(action.type))
    assert about.whole is False and about.lines == 1
    assert len(content) < CONTENT_CAP + 300
    assert content.endswith(f"[… {about.note}]\n")
    assert "characters) are not shown here" in about.note


async def test_an_unstorable_character_is_noted_by_the_content_not_hidden(tmp_path: Path) -> None:
    # the message content is scrubbed on the way to the store (ask_approval); the action's
    # own text keeps it, so the digest is over what runs
    action = Action("terminal_run", {"command": "echo a\x00b"})
    content, _, _ = await approval_content(tmp_path, action, REGISTRY.get(action.type))
    assert content == "echo a\x00b"


def test_the_digest_is_over_the_canonical_json_of_type_and_params() -> None:
    a = action_digest("terminal_run", {"command": "ls", "cwd": "src"})
    b = action_digest("terminal_run", {"cwd": "src", "command": "ls"})
    assert a == b and a.startswith("sha256:") and len(a) == len("sha256:") + 64
    assert action_digest("terminal_run", {"command": "ls "}) != a  # one space differs
    assert action_digest("write_code", {"command": "ls", "cwd": "src"}) != a
    assert (
        canonical("t", {"k": "\ud800é"}) == b'{"action_type":"t","params":{"k":"\\ud800\\u00e9"}}'
    )


def test_an_action_runs_only_if_it_is_the_one_approved() -> None:
    action = Action("terminal_run", {"command": "echo safe"})
    digest = action_digest(action.type, action.params)
    approved = WaitAnswer(uuid="u", decision="approve", digest=digest)
    assert approved_as_shown(action, approved)
    changed = Action("terminal_run", {"command": "echo safe; rm -rf ~"})
    assert not approved_as_shown(changed, approved)
    before_digests = WaitAnswer.model_validate_json('{"uuid": "u", "decision": "approve"}')
    assert approved_as_shown(changed, before_digests)  # stored before digests
