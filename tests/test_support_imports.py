"""Test modules share helpers through tests/support (or a support module beside them), never
by importing another test module or a conftest: a test module stays free to change alone."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def shared_from_tests(path: Path) -> list[str]:
    """The modules ``path`` imports that are test modules or conftests (``line imports name``)."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom):
            names = [node.module or ""] if node.level == 0 else [f".{node.module or ''}"]
        elif isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        else:
            continue
        for name in names:
            last = name.rsplit(".", 1)[-1]
            if last == "conftest" or last.startswith("test_"):
                found.append(f"{path}:{node.lineno} imports {name}")
    return found


def test_no_module_imports_a_test_module_or_a_conftest() -> None:
    files = sorted([*(ROOT / "tests").rglob("*.py"), *(ROOT / "bench").rglob("*.py")])
    assert len(files) > 100
    assert [hit for path in files for hit in shared_from_tests(path)] == []


def test_the_check_sees_each_kind_of_import(tmp_path: Path) -> None:
    probe = tmp_path / "probe.py"
    probe.write_text(
        "from tests.ui.test_ui import send_goal\n"
        "from tests.conftest import make_settings\n"
        "import tests.runs.test_lease\n"
        "from .test_x import y\n"
        "from tests.support.ui import send_goal as ok\n"
    )
    hits = shared_from_tests(probe)
    assert [h.split(" imports ")[1] for h in hits] == [
        "tests.ui.test_ui",
        "tests.conftest",
        "tests.runs.test_lease",
        ".test_x",
    ]
