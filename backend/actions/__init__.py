"""Turning model replies into actions, and the registry that defines them."""

from backend.actions.model import Action, ActionSpec, FormatError, TruncatedReplyError
from backend.actions.parse import extract_thinking, parse_actions
from backend.actions.registry import ActionDef, Registry, builtin_registry

__all__ = [
    "Action",
    "ActionDef",
    "ActionSpec",
    "FormatError",
    "Registry",
    "TruncatedReplyError",
    "builtin_registry",
    "extract_thinking",
    "parse_actions",
]
