"""What people see of paths (backend/messages/paths.py): the workspace folder made relative,
and nothing compiled for text that does not name it (a run's usual reply)."""

from __future__ import annotations

from pathlib import Path

from backend.messages import paths
from backend.messages.paths import relative_paths, relative_paths_in


def test_the_workspace_folder_becomes_relative(tmp_path: Path) -> None:
    work = tmp_path / "w"
    text = f"wrote {work}/src/a.py in {work}; not {work}x/b"
    assert relative_paths(text, work) == f"wrote src/a.py in .; not {work}x/b"
    assert relative_paths_in({"k": [f"{work}/f"]}, work) == {"k": ["f"]}
    assert relative_paths("a / b", Path("/")) == "a / b"  # the root is no workspace


def test_text_that_names_no_workspace_compiles_no_pattern(tmp_path: Path) -> None:
    before = paths._pattern.cache_info()
    for i in range(20):  # each run its own workspace
        assert relative_paths("The answer is 42.", tmp_path / f"conv-{i}") == "The answer is 42."
    after = paths._pattern.cache_info()
    assert (after.hits, after.misses) == (before.hits, before.misses)
