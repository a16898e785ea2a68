"""USD per token from litellm's local price table, without importing litellm.

litellm ships its table as ``model_prices_and_context_window_backup.json`` (the product sets
``LITELLM_LOCAL_MODEL_COST_MAP=True``, so litellm itself reads the same file). Importing
litellm costs seconds and a lot of memory; the lean path only needs four numbers per model
(input, output, cached read, cache write), so it reads the file once, in a worker thread,
keeps only the prices, and caches the answer per model.

The cached rates are the table's ``cache_read_input_token_cost`` and
``cache_creation_input_token_cost``; a model without them pays its input rate, as in
litellm's own cost function (``litellm.cost_per_token``), which the litellm path uses.
"""

from __future__ import annotations

import importlib.util
import json
import threading
from pathlib import Path
from typing import NamedTuple

import anyio


class Prices(NamedTuple):
    """USD per token: uncached input, output, input read from cache, input written to it."""

    prompt: float
    completion: float
    cache_read: float
    cache_write: float


_TABLE: dict[str, Prices] | None = None
_WINDOWS: dict[str, int] = {}  # max_input_tokens, where the table has it
_LOCK = threading.Lock()
_CACHE: dict[str, Prices | None] = {}


def _table_path() -> Path | None:
    spec = importlib.util.find_spec("litellm")  # finds the package, does not import it
    if spec is None or spec.origin is None:
        return None
    path = Path(spec.origin).parent / "model_prices_and_context_window_backup.json"
    return path if path.is_file() else None


def _number(value: object, default: float) -> float:
    return float(value) if isinstance(value, int | float) else default


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
                    window = entry.get("max_input_tokens")
                    if isinstance(window, int) and window > 0:
                        _WINDOWS[name] = window
                    prompt = entry.get("input_cost_per_token")
                    completion = entry.get("output_cost_per_token")
                    if isinstance(prompt, int | float) and isinstance(completion, int | float):
                        table[name] = Prices(
                            float(prompt),
                            float(completion),
                            _number(entry.get("cache_read_input_token_cost"), float(prompt)),
                            _number(entry.get("cache_creation_input_token_cost"), float(prompt)),
                        )
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


def input_window(model: str) -> int | None:
    """The model's input limit in tokens (the table's ``max_input_tokens``), None when the
    table does not know it. Blocking on first use, as :func:`lookup`."""
    _load()
    found = _WINDOWS.get(model)
    if found is None and "/" in model:
        found = _WINDOWS.get(model.split("/", 1)[1])
    return found


async def prices(model: str) -> Prices | None:
    if model in _CACHE:
        return _CACHE[model]
    return await anyio.to_thread.run_sync(lookup, model)


def cost(
    found: Prices | None,
    prompt_tokens: int,
    completion_tokens: int,
    cached_tokens: int = 0,
    cache_write_tokens: int = 0,
) -> float | None:
    """The price of a call. ``prompt_tokens`` is every input token (as providers report it,
    and litellm for Anthropic): those read from cache and those written to it are priced at
    their own rates, the rest at the input rate."""
    if found is None:
        return None
    cached = min(cached_tokens, prompt_tokens)
    written = min(cache_write_tokens, prompt_tokens - cached)
    plain = prompt_tokens - cached - written
    return (
        plain * found.prompt
        + cached * found.cache_read
        + written * found.cache_write
        + completion_tokens * found.completion
    )


def cache_cost(found: Prices | None, cached_tokens: int, cache_write_tokens: int) -> float | None:
    """What the cached part of a call's input cost (reads and writes at their rates)."""
    if found is None:
        return None
    return cached_tokens * found.cache_read + cache_write_tokens * found.cache_write
