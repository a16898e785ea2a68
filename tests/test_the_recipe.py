"""docs/tools.md "A new action", followed as written, in a copy of the tree: the module and
its test given there are written where it says, ``make frontend-types`` runs, and then the
only files that differ from the copy's start are those two and the files made from the
registry; the new test, lint and the tests that hold the code's lists of actions, kinds,
payloads and approval classes against the registry all pass there with nothing else edited."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
TOOLS_DOC = ROOT / "docs" / "tools.md"
RECIPE = re.compile(r"<!-- recipe: (\S+) -->\n```python\n(.*?)\n```", re.S)
# what `make frontend-types` makes from the registry
GENERATED = {"frontend/src/lib/message.gen.ts", "docs/api.md"}
# the tests that read the code's lists of actions, kinds, payloads and classes
DERIVED = [
    "tests/test_docs_match_code.py",
    "tests/messages/test_wire_types.py",
    "tests/messages/test_kinds.py",
    "tests/actions/test_only_the_registry_names_actions.py",
    "tests/actions/test_registry.py",
    "tests/waits/test_classes.py",
]


def recipe_files(text: str) -> dict[str, str]:
    """The files docs/tools.md's recipe writes: path -> content."""
    return {path: body + "\n" for path, body in RECIPE.findall(text)}


def _run(cmd: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    env.pop("VIRTUAL_ENV", None)
    return subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, check=False)


def _copy_tree(dest: Path) -> None:
    """The tree as it is (tracked and new files, not ignored ones), committed in a
    repository of its own; the Python environment and the frontend's packages linked."""
    listed = _run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], ROOT)
    for name in filter(None, listed.stdout.split("\0")):
        src = ROOT / name
        if src.is_file():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / name)
    (dest / ".venv").symlink_to(ROOT / ".venv")
    (dest / "frontend" / "node_modules").symlink_to(ROOT / "frontend" / "node_modules")
    for cmd in (
        ["git", "init", "-q"],
        ["git", "add", "-A"],
        ["git", "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "start"],
    ):
        assert _run(cmd, dest).returncode == 0, cmd


def test_the_recipe_gives_a_module_and_its_test() -> None:
    files = recipe_files(TOOLS_DOC.read_text(encoding="utf-8"))
    assert set(files) == {
        "backend/actions/registry/builtin/word_count.py",
        "tests/actions/test_word_count.py",
    }
    assert all(not (ROOT / path).exists() for path in files), "the example is not in the tree"


@pytest.mark.skipif(
    not (ROOT / "frontend" / "node_modules" / ".package-lock.json").exists(),
    reason="frontend/node_modules is not installed (make frontend-types needs it)",
)
def test_following_the_recipe_changes_the_module_its_test_and_generated_files_only(
    tmp_path: Path,
) -> None:
    tree = tmp_path / "tree"
    _copy_tree(tree)
    files = recipe_files(TOOLS_DOC.read_text(encoding="utf-8"))
    for path, text in files.items():
        (tree / path).write_text(text, encoding="utf-8")
    # the make target as a newcomer runs it (its installs are up to date: linked here)
    made = _run(
        [
            "make",
            "-o",
            ".venv/.synced",
            "-o",
            "frontend/node_modules/.package-lock.json",
            "frontend-types",
        ],
        tree,
    )
    assert made.returncode == 0, made.stdout + made.stderr
    status = _run(["git", "status", "--porcelain", "--untracked-files=all"], tree).stdout
    changed = {line[3:] for line in status.splitlines()}
    assert changed == set(files) | GENERATED, status
    # what changed in the generated files is the new action's
    api = (tree / "docs" / "api.md").read_text(encoding="utf-8")
    assert "| `word_count` | `word_count` | `path` | WordCount |" in api
    assert "WordCount" in (tree / "frontend/src/lib/message.gen.ts").read_text(encoding="utf-8")
    python = str(ROOT / ".venv" / "bin" / "python")
    lint = _run([python, "-m", "ruff", "check", *files], tree)
    assert lint.returncode == 0, lint.stdout
    tests = _run([python, "-m", "pytest", "-q", "-p", "no:cacheprovider", *files, *DERIVED], tree)
    assert tests.returncode == 0, tests.stdout[-4000:]
    assert " passed" in tests.stdout and "failed" not in tests.stdout


def test_a_recipe_block_is_read_with_its_path() -> None:
    text = "<!-- recipe: a/b.py -->\n```python\nx = 1\n```\nprose\n"
    assert recipe_files(text) == {"a/b.py": "x = 1\n"}
