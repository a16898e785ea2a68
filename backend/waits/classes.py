"""Which actions ask before they run (docs/api.md "Runs that wait for a person"), pure.

| mode     | asks for                                                    |
| -------- | ----------------------------------------------------------- |
| `never`  | nothing (the default)                                       |
| `risky`  | `terminal` (terminal_run), `web` (web_search, web_fetch), `mcp` (mcp_tool) |
| `always` | the above and `edits` (write_code, edit_file)               |

read_file (and finish, ask_user) never ask. An action's class is its registry entry's
``approval`` attribute; ``approve_all`` adds a class to the run's approved classes.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import get_args

from backend.waits.replies import ApprovalDecision

APPROVAL_MODES = ("never", "risky", "always")
RISKY_CLASSES = frozenset({"terminal", "web", "mcp"})
DECISIONS: tuple[ApprovalDecision, ...] = get_args(ApprovalDecision)
APPROVAL = "approval"  # the kinds of wait: meta.action_type of the message waited on
ASK_USER = "ask_user"


def asks(mode: str, action_class: str | None, approved: Iterable[str] = ()) -> bool:
    """Whether an action of ``action_class`` waits for a person's approval first."""
    if action_class is None or mode == "never" or action_class in set(approved):
        return False
    return mode == "always" or action_class in RISKY_CLASSES
