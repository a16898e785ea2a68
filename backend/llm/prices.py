"""USD per token from litellm's local price table, without importing litellm.

litellm ships its table as ``model_prices_and_context_window_backup.json`` (the product sets
``LITELLM_LOCAL_MODEL_COST_MAP=True``, so litellm itself reads the same file). Importing
litellm costs seconds and a lot of memory; the lean path only needs two numbers per model,
so it reads the file once, in a worker thread, keeps only the prices, and caches the
answer per model.
"""

from __future__ import annotations

import importlib.util
import json
import threading
from pathlib import Path

import anyio

Prices = tuple[float, float]  # USD per prompt token, per completion token

_TABLE: dict[str, Prices] | None = None
_LOCK = threading.Lock()
_CACHE: dict[str, Prices | None] = {}


def _table_path() -> Path | None:
    spec = importlib.util.find_spec("litellm")  # finds the package, does not import it
    if spec is None or spec.origin is None:
        return None
    path = Path(spec.origin).parent / "model_prices_and_context_window_backup.json"
    return path if path.is_file() else None


def _load() -> dict[str, Prices]:
    global _TABLE
    with _LOCK:
        if _TABLE is None:
            table: dict[str, Prices] = {}
            path = _table_path()
            if path is not None:
                try:
                    raw = json.loads(path.read_bytes())
                except (OSError, ValueError):
                    raw = {}
                for name, entry in raw.items():
                    if not isinstance(entry, dict):
                        continue
                    prompt = entry.get("input_cost_per_token")
                    completion = entry.get("output_cost_per_token")
                    if isinstance(prompt, int | float) and isinstance(completion, int | float):
                        table[name] = (float(prompt), float(completion))
            _TABLE = table
        return _TABLE


def lookup(model: str) -> Prices | None:
    """Prices for a litellm model id (``openai/gpt-4o-mini``, ``deepseek/deepseek-chat``,
    ``openrouter/qwen/…``): the id itself, else the id without its provider prefix.
    Blocking on first use (reads the table): call :func:`prices` from async code."""
    if model in _CACHE:
        return _CACHE[model]
    table = _load()
    found = table.get(model)
    if found is None and "/" in model:
        found = table.get(model.split("/", 1)[1])
    if model == "sample_spec":
        found = None
    _CACHE[model] = found
    return found


async def prices(model: str) -> Prices | None:
    if model in _CACHE:
        return _CACHE[model]
    return await anyio.to_thread.run_sync(lookup, model)


def cost(found: Prices | None, prompt_tokens: int, completion_tokens: int) -> float | None:
    if found is None:
        return None
    return prompt_tokens * found[0] + completion_tokens * found[1]
