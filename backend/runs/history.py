"""A conversation's earlier goals with their answers, for a follow-up goal's prompts."""

from __future__ import annotations

from backend.messages.kinds import MessageKind
from backend.store.repo import Store

HISTORY_TURNS = 6
HISTORY_CHARS = 1500


async def conversation_history(store: Store, cid: str, run_id: str) -> list[dict[str, str]]:
    """The last turns of ``cid`` before ``run_id``: goal and answer, each clipped."""
    msgs = await store.messages(
        cid,
        limit=100_000,
        action_types=(MessageKind.QUESTION, MessageKind.AUTO_REPLY, MessageKind.FINISH_SUMMERY),
    )
    turns: list[dict[str, str]] = []
    for m in msgs:
        if m.run_id == run_id:
            continue
        kind = m.meta.action_type
        if kind == MessageKind.QUESTION:
            turns.append({"goal": _clip(m.content), "answer": ""})
        elif kind in (MessageKind.AUTO_REPLY, MessageKind.FINISH_SUMMERY) and turns:
            turns[-1]["answer"] = _clip(m.content)
    return turns[-HISTORY_TURNS:]


def _clip(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= HISTORY_CHARS else text[:HISTORY_CHARS] + "…"
