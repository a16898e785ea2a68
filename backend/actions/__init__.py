"""Turning model replies into actions."""

from backend.actions.model import ACTIONS, Action, ActionSpec, FormatError, TruncatedReplyError
from backend.actions.parse import extract_thinking, parse_actions

__all__ = [
    "ACTIONS",
    "Action",
    "ActionSpec",
    "FormatError",
    "TruncatedReplyError",
    "extract_thinking",
    "parse_actions",
]
