"""What the docs list against what the code has: the actions of docs/api.md's tables against
the action registry, the settings of the docs' tables and .env.example against
:class:`backend.config.Settings`. Each check returns its problems as sentences (none: the docs
and the code agree), so that a test can show a new action or setting reaching it."""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable, Iterator
from pathlib import Path

from backend.actions.registry import ActionDef
from backend.config import Settings
from backend.waits import APPROVAL_MODES, asks

ROOT = Path(__file__).resolve().parents[1]
API_DOC = ROOT / "docs" / "api.md"
ENV_EXAMPLE = ROOT / ".env.example"
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
# where the code reads variables that are not Settings (logging, tracing, the web tools, the
# Compose file and the images' build arguments)
OTHER_READERS = [
    *sorted((ROOT / "backend").rglob("*.py")),
    *sorted((ROOT / "scripts").rglob("*.py")),
    ROOT / "docker-compose.yml",
    ROOT / "Dockerfile",
    *sorted((ROOT / "sandbox").rglob("Dockerfile*")),
]
# read by the tools themselves: Docker Compose
READ_BY_TOOLS = {"COMPOSE_PROFILES"}

NAME = re.compile(r"`([a-z_][a-z0-9_]*)`")
VARIABLE = re.compile(r"^[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)*$")
ASKS = {"asks": True, "runs": False}


def tables(text: str) -> Iterator[tuple[list[str], list[list[str]]]]:
    """Every Markdown table of ``text``: its header cells and its rows' cells."""
    lines = text.splitlines()
    for i in range(len(lines) - 1):
        if lines[i].startswith("|") and re.match(r"^\|\s*-{3}", lines[i + 1]):
            rows = []
            for line in lines[i + 2 :]:
                if not line.startswith("|"):
                    break
                rows.append(_cells(line))
            yield _cells(lines[i]), rows


def _cells(line: str) -> list[str]:
    cells = re.split(r"(?<!\\)\|", line.strip())
    return [cell.strip() for cell in cells[1:-1]]


def approval_table(text: str) -> list[list[str]]:
    """The rows of the table of "Runs that wait for a person": which actions ask."""
    for header, rows in tables(text):
        if header[:2] == ["action", "class"]:
            return rows
    raise AssertionError("docs/api.md has no table of the actions' approval classes")


def action_problems(text: str, defs: Iterable[ActionDef]) -> list[str]:
    """How docs/api.md's tables disagree with the registered actions ``defs``: the approval
    table names every action once with its class and what each mode does; a table with a
    stream ``action_type`` column says each action's kind; every table whose first column is
    "action" names registered actions only."""
    by_name = {defn.name: defn for defn in defs}
    problems: list[str] = []
    listed: list[str] = []
    for row in approval_table(text):
        names, cls, *modes = row
        for name in NAME.findall(names):
            listed.append(name)
            defn = by_name.get(name)
            if defn is None:
                continue
            said = None if cls == "none" else cls.strip("`")
            approval = defn.handling.approval
            if said != approval:
                problems.append(f"{name}: the docs say class {cls}, its ActionDef {approval}")
            want = [asks(mode, approval) for mode in APPROVAL_MODES]
            if [ASKS.get(m) for m in modes] != want:
                problems.append(f"{name}: the docs say {modes} for never/risky/always")
    for name in sorted(set(by_name) - set(listed)):
        problems.append(f"{name} is an action the approval table of docs/api.md does not list")
    problems += [f"{n} is listed twice in the approval table" for n in _twice(listed)]
    for header, rows in tables(text):
        if header[0] != "action":
            continue
        kind_column = next((i for i, h in enumerate(header) if "`action_type`" in h), None)
        for row in rows:
            for name in NAME.findall(row[0].split("(")[0]):
                if name not in by_name:
                    problems.append(f"docs/api.md lists an action {name!r} the code does not have")
                elif kind_column is not None and row[kind_column] != f"`{by_name[name].kind}`":
                    kind = by_name[name].kind
                    problems.append(f"{name}: the docs say kind {row[kind_column]}, it is {kind}")
    return problems


def _twice(names: list[str]) -> list[str]:
    return sorted({n for n in names if names.count(n) > 1})


def setting_names(settings: type[Settings] = Settings) -> set[str]:
    """The variables the settings read (``RUNTIME`` for ``runtime``)."""
    return {name.upper() for name in settings.model_fields}


def env_example_names(text: str) -> set[str]:
    """The variables .env.example sets or shows (``NAME=`` or ``# NAME=``)."""
    return set(re.findall(r"^#?\s*([A-Z][A-Z0-9_]*)=", text, re.MULTILINE))


def doc_table_names(texts: Iterable[str]) -> set[str]:
    """The variables listed in the docs' tables of settings (first column "variable" or
    "setting")."""
    found: set[str] = set()
    for text in texts:
        for header, rows in tables(text):
            if header and header[0] in ("variable", "setting"):
                found |= {m for row in rows for m in re.findall(r"^`([A-Z][A-Z0-9_]*)`", row[0])}
    return found


def read_elsewhere(paths: Iterable[Path] = OTHER_READERS) -> set[str]:
    """Variables the code reads that are not settings: names given to ``environ``/``getenv``
    (or kept in a tuple of such names) in the backend, ``${NAME}`` in the Compose file,
    ``ARG NAME`` in the Dockerfiles."""
    found: set[str] = set()
    for path in paths:
        text = path.read_text(encoding="utf-8")
        if path.suffix == ".py":
            found |= _environ_names(ast.parse(text))
        else:
            found |= set(re.findall(r"\$\{([A-Z][A-Z0-9_]*)", text))
            found |= set(re.findall(r"^ARG ([A-Z][A-Z0-9_]*)", text, re.MULTILINE))
    return found | READ_BY_TOOLS


def _environ_names(tree: ast.AST) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(tree):
        for arg in _names_given(node):
            if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
                found.add(arg.value)
    return {name for name in found if VARIABLE.match(name)}


def _names_given(node: ast.AST) -> list[ast.expr]:
    """The expressions ``node`` gives as variable names: ``x.get(NAME)``, ``environ[NAME]``,
    ``..._VARIABLES = (NAME, …)``, ``..._VARIABLE = NAME``."""
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
        return node.args[:1] if node.func.attr in ("get", "getenv", "pop", "setdefault") else []
    if isinstance(node, ast.Subscript):
        return [node.slice]
    if isinstance(node, ast.Assign):
        targets = [t.id for t in node.targets if isinstance(t, ast.Name)]
        if isinstance(node.value, ast.Tuple) and any(t.endswith("VARIABLES") for t in targets):
            return list(node.value.elts)
        if any(t.endswith("VARIABLE") for t in targets):
            return [node.value]
    return []


def setting_problems(
    settings: set[str],
    env_example: set[str],
    docs_tables: set[str],
    docs_text: str,
    other: set[str],
) -> list[str]:
    """How the docs and .env.example disagree with the settings: each setting is in
    .env.example and named in the docs; each variable they list is a setting or one the
    code reads elsewhere (``other``)."""
    problems = [f"{n} is a setting .env.example does not show" for n in settings - env_example]
    words = set(re.findall(r"[A-Z][A-Z0-9_]*", docs_text))
    problems += [f"{n} is a setting the docs never name" for n in settings - words]
    known = settings | other
    problems += [f".env.example sets {n}, which nothing reads" for n in env_example - known]
    problems += [f"the docs' tables list {n}, which nothing reads" for n in docs_tables - known]
    return sorted(problems)
