"""Reusable model replies for pipeline tests."""

from __future__ import annotations

import json

TRICKY = 'print("a < b && c > d") # & \'quotes\' "double" ]]> </content> done\n'


def plan_reply(*titles: str, prose: str = "I'll do it.") -> str:
    tasks = [{"title": t, "description": f"Do: {t}", "requirement": f"{t} is done"} for t in titles]
    return f"{prose}\n{json.dumps(tasks)}"


def write(path: str, content: str) -> str:
    return f"<write_code>\n<path>{path}</path>\n<content>\n{content}</content>\n</write_code>"


def run(command: str) -> str:
    return f"<terminal_run><command>{command}</command></terminal_run>"


def finish(message: str) -> str:
    return f"<finish><message>{message}</message></finish>"
