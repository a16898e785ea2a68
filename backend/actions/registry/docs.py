"""docs/api.md's tables of the actions, made from the registry: which actions ask before they
run (by approval class) and what each action's messages are (stream kind, parameters,
``meta.json`` models). ``make frontend-types`` rewrites them in place:

    python -m backend.actions.registry.docs docs/api.md

Each table sits between a ``<!-- made from the action registry: NAME -->`` line and
``<!-- end: NAME -->``; the text around them is the docs' own. tests/test_docs_match_code.py
fails while the committed file differs from what the registry gives.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable
from pathlib import Path

from backend.actions.registry import builtin_registry
from backend.actions.registry.core import ActionDef, Registry
from backend.waits.classes import APPROVAL_MODES, asks

BEGIN = "<!-- made from the action registry: {name} (make frontend-types; do not edit) -->"
END = "<!-- end: {name} -->"


def _names(defs: list[ActionDef]) -> str:
    return ", ".join(f"`{d.name}`" for d in defs)


def approval_table(registry: Registry) -> str:
    """One row per approval class (those that ask in more modes first, then in prompt
    order), with what each approval mode does."""
    classes: dict[str | None, list[ActionDef]] = {}
    for defn in registry.defs():
        classes.setdefault(defn.handling.approval, []).append(defn)

    def weight(cls: str | None) -> int:
        return -sum(asks(mode, cls) for mode in APPROVAL_MODES)

    lines = ["| action | class | `never` | `risky` | `always` |", "| --- | --- | --- | --- | --- |"]
    for cls in sorted(classes, key=weight):  # (sorted is stable: prompt order within)
        modes = " | ".join("asks" if asks(mode, cls) else "runs" for mode in APPROVAL_MODES)
        shown = f"`{cls}`" if cls else "none"
        lines.append(f"| {_names(classes[cls])} | {shown} | {modes} |")
    return "\n".join(lines)


def kinds_table(registry: Registry) -> str:
    """One row per action stream kind: the actions of that kind, their parameters (``?``:
    optional) and the models of what their messages carry in ``meta.json``."""
    lines = [
        "| kind | action | params | items (model) |",
        "| --- | --- | --- | --- |",
    ]
    for kind in registry.kinds():
        defs = [d for d in registry.defs() if d.kind == kind]
        params = "; ".join(
            ", ".join([f"`{p}`" for p in d.spec.required] + [f"`{p}`?" for p in d.spec.optional])
            or "none"
            for d in defs
        )
        models = ", ".join(m.__name__ for m in registry.payload_of(kind)) or "`[]`"
        lines.append(f"| `{kind}` | {_names(defs)} | {params} | {models} |")
    return "\n".join(lines)


TABLES: dict[str, Callable[[Registry], str]] = {
    "approval classes": approval_table,
    "action kinds": kinds_table,
}


class MissingTable(ValueError):
    """The docs have no place for one of the tables (its markers are missing)."""


def rewrite(text: str, registry: Registry | None = None) -> str:
    """``text`` with every table between its markers made anew from ``registry`` (None: the
    builtin one). Raises MissingTable naming a table whose markers are not there."""
    registry = registry or builtin_registry()
    for name, make in TABLES.items():
        begin, end = BEGIN.format(name=name), END.format(name=name)
        pattern = re.compile(re.escape(begin) + r"\n.*?" + re.escape(end), re.S)
        found = pattern.search(text)
        if found is None:
            raise MissingTable(f"the docs have no {begin!r} ... {end!r} block")
        block = f"{begin}\n\n{make(registry)}\n\n{end}"
        text = text[: found.start()] + block + text[found.end() :]
    return text


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        sys.stderr.write("usage: python -m backend.actions.registry.docs docs/api.md\n")
        return 2
    path = Path(args[0])
    try:
        new = rewrite(path.read_text(encoding="utf-8"))
    except (OSError, MissingTable) as exc:
        sys.stderr.write(f"{path}: {exc}\n")
        return 1
    if new != path.read_text(encoding="utf-8"):
        path.write_text(new, encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
