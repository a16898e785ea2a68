"""What the service says to the model about a reply it could not use.

Such a note goes to the model as a user turn marked as the service's (NOTE_HEAD), never as
an assistant turn: the model must not read the service's words as its own, or it repeats
them (a weak model answered "(the plan could not be read)" when that stood in its turn).
The unusable reply itself may be resent as the model's: those are its own words.
"""

from __future__ import annotations

from typing import Any

NOTE_HEAD = "[A note from the planact service, not from the person]"


def service_note(text: str) -> dict[str, Any]:
    """The user turn carrying the service's note ``text`` to the model."""
    return {"role": "user", "content": f"{NOTE_HEAD}\n{text}"}


def own_reply(text: str) -> list[dict[str, Any]]:
    """The model's unusable reply, resent as its own turn (none when it said nothing)."""
    return [{"role": "assistant", "content": text}] if text.strip() else []
