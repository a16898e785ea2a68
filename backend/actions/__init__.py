"""Turning model replies into actions, and the registry that defines them."""

from backend.actions.model import ACTIONS, Action, ActionSpec, FormatError, TruncatedReplyError
from backend.actions.parse import extract_thinking, parse_actions
from backend.actions.registry import ActionDef, register  # fills the tables the parser reads

__all__ = [
    "ACTIONS",
    "Action",
    "ActionDef",
    "ActionSpec",
    "FormatError",
    "TruncatedReplyError",
    "extract_thinking",
    "parse_actions",
    "register",
]
