"""Nothing but the action registry switches on an action's name: no module of backend/ outside
backend/actions/registry compares an action's type, name or stream kind with an action's
name or kind (they ask the action's definition instead: ``ActionDef.handling.asks_person``,
``ends_task``, ``approval_view``, ``output_is_result``, ``spec.whole_file``). The run's own
kinds (:class:`~backend.messages.kinds.MessageKind`, e.g. a question to the person) are not
actions' names and may be compared."""

from __future__ import annotations

import ast
from pathlib import Path

from backend.actions import builtin_registry
from backend.messages.kinds import MessageKind

BACKEND = Path(__file__).resolve().parents[2] / "backend"
REGISTRY = BACKEND / "actions" / "registry"
# what is compared: an action's type or name, a message's kind
SUBJECTS = {"type", "name", "kind", "action_type", "action"}


def _is_subject(node: ast.expr) -> bool:
    if isinstance(node, ast.Attribute):
        return node.attr in SUBJECTS
    if isinstance(node, ast.Name):
        return node.id in SUBJECTS
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
        args = node.args[:1]  # a message's payload: .get("action_type")
        return node.func.attr == "get" and any(
            isinstance(a, ast.Constant) and a.value == "action_type" for a in args
        )
    return False


def _names_an_action(node: ast.expr, actions: set[str]) -> bool:
    if isinstance(node, ast.Constant):
        return isinstance(node.value, str) and node.value in actions
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
        if node.value.id == "ActionType":
            return True
        own = {kind.name for kind in MessageKind}
        return node.value.id == "MessageKind" and node.attr not in own
    if isinstance(node, ast.Tuple | ast.List | ast.Set):
        return any(_names_an_action(e, actions) for e in node.elts)
    return False


def switches(tree: ast.AST, actions: set[str]) -> list[int]:
    """The lines where ``tree`` compares an action's type or kind with an action's name."""
    lines = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare):
            operands = [node.left, *node.comparators]
            if any(_is_subject(o) for o in operands) and any(
                _names_an_action(o, actions) for o in operands
            ):
                lines.append(node.lineno)
    return lines


def test_no_module_outside_the_registry_switches_on_an_actions_name() -> None:
    own = {kind.value for kind in MessageKind}
    defs = builtin_registry().defs()
    actions = {d.name for d in defs} | {d.kind for d in defs}
    actions -= own  # `finish` and `ask_user` are also the run's own kinds
    found = {}
    for path in sorted(BACKEND.rglob("*.py")):
        if REGISTRY in path.parents:
            continue
        lines = switches(ast.parse(path.read_text(encoding="utf-8")), actions)
        if lines:
            found[str(path.relative_to(BACKEND.parent))] = lines
    assert found == {}


def test_the_scan_finds_the_switches_it_is_about() -> None:
    actions = {"terminal_run", "write_code", "search"}
    code = (
        "if action.type == 'terminal_run': pass\n"
        "if msg.meta.action_type in ('write_code', 'edit_file'): pass\n"
        "if kind != MessageKind.TERMINAL_RUN: pass\n"
        "if spec.name == ActionType.WRITE_CODE: pass\n"
        "if payload.get('action_type') not in (None, 'search'): pass\n"
        "if kind == MessageKind.APPROVAL: pass\n"  # the run's own kind: allowed
        "if 'search' in params: pass\n"  # not an action's type: allowed
        "if payload.get('type') == 'search': pass\n"  # a provider's answer: allowed
    )
    assert switches(ast.parse(code), actions) == [1, 2, 3, 4, 5]
