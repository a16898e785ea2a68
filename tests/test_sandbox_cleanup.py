"""The suite's sandbox clean-up removes only its own test's sandboxes."""

from __future__ import annotations

from pathlib import Path

from tests.support.sandboxes import mine


def test_only_sandboxes_under_the_tests_own_folder_are_its_own(tmp_path: Path) -> None:
    own = tmp_path / "test_kill1"
    assert mine(str(own / "workspace" / "user_1" / "Conversation_a"), own)
    assert mine(str(own), own)
    assert not mine(str(tmp_path / "test_kill10" / "workspace"), own)  # a sibling's
    assert not mine("", own)
