"""The log context: contextvars, so that every task a request or a run starts carries it."""

from __future__ import annotations

from contextvars import ContextVar, Token
from dataclasses import dataclass

FIELDS = ("run_id", "conversation_id", "user")
_VARS: dict[str, ContextVar[str | None]] = {
    name: ContextVar(f"planact_log_{name}", default=None) for name in FIELDS
}


@dataclass
class LogContext:
    """What :func:`bind` set; ``reset()`` puts back what was there before."""

    tokens: list[tuple[ContextVar[str | None], Token[str | None]]]

    def reset(self) -> None:
        for var, token in reversed(self.tokens):
            var.reset(token)
        self.tokens.clear()


def bind(
    *, run_id: str | None = None, conversation_id: str | None = None, user: str | None = None
) -> LogContext:
    """Set the given fields (None: left as they are) for this task and those it starts."""
    given = {"run_id": run_id, "conversation_id": conversation_id, "user": user}
    return LogContext(
        [(_VARS[k], _VARS[k].set(v)) for k, v in given.items() if v is not None and v != ""]
    )


def current() -> dict[str, str]:
    """The fields known here."""
    found = {name: var.get() for name, var in _VARS.items()}
    return {k: v for k, v in found.items() if v}
