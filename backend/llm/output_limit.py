"""The longest reply a model call may ask for (its ``max_tokens``).

Every call is bounded: ``LLM_MAX_OUTPUT_TOKENS`` when set, else the model's own output
limit where litellm's local table knows it (``max_output_tokens``, read from the same file
as the prices, without importing litellm), else DEFAULT. Unbounded, a server such as
llama-server generates until its context is full: a rambling model runs to
LLM_CALL_MAX_SECONDS. The model check (stage ``check``) asks for at most CHECK (a word is
the answer; a reasoning model still has room to think).
"""

from __future__ import annotations

import json
import threading

import anyio

from backend.llm.prices import _table_path

DEFAULT = 8192
CHECK = 1024

_TABLE: dict[str, int] | None = None
_LOCK = threading.Lock()


def _load() -> dict[str, int]:
    global _TABLE
    with _LOCK:
        if _TABLE is None:
            table: dict[str, int] = {}
            path = _table_path()
            try:
                raw = json.loads(path.read_bytes()) if path is not None else {}
            except (OSError, ValueError):
                raw = {}
            for name, entry in raw.items():
                if isinstance(entry, dict):
                    limit = entry.get("max_output_tokens") or entry.get("max_tokens")
                    if isinstance(limit, int) and not isinstance(limit, bool) and limit > 0:
                        table[name] = limit
            _TABLE = table
        return _TABLE


def model_limit(model: str) -> int | None:
    """The output limit litellm's table gives ``model`` (or the id without its provider
    prefix), None when it does not know it. Blocking on first use: see :func:`max_tokens`."""
    table = _load()
    found = table.get(model)
    if found is None and "/" in model:
        found = table.get(model.split("/", 1)[1])
    return found


async def max_tokens(model: str, configured: int | None, stage: str) -> int:
    """The ``max_tokens`` of one call of ``stage`` to ``model``."""
    if configured:
        limit = configured
    else:
        known = model_limit(model) if _TABLE is not None else None
        if known is None and _TABLE is None:
            known = await anyio.to_thread.run_sync(model_limit, model)
        limit = known or DEFAULT
    return min(limit, CHECK) if stage == "check" else limit
