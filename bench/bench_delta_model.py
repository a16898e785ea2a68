"""What typing the live delta costs: one delta made and written to its SSE bytes, as a
DeltaEvent (backend/messages/deltas.py: the model from the coalescer to the browser)
against the plain dict and orjson it replaced, measured in the same run.

  uv run python bench/bench_delta_model.py [--n 200000]

Prints the median of 7 rounds per path (microseconds per delta) and the ratio. A run sends
~200 deltas (docs/figures.md): the difference per run is the per-delta cost times that.
Asserts nothing.
"""

from __future__ import annotations

import argparse
import statistics
import time

import orjson

from backend.api.sse import feed_event_bytes
from backend.messages.deltas import DeltaEvent

HEAD = b"event: delta\r\ndata: "
TEXT = "compiling module 17 of 40\n"


def typed(n: int) -> float:
    t0 = time.perf_counter()
    for i in range(n):
        delta = DeltaEvent(
            uuid="u1", action_type="terminal_run", text=TEXT, stream="stdout", offset=i
        )
        feed_event_bytes(delta)
    return (time.perf_counter() - t0) / n


def plain(n: int) -> float:
    """The path before: a dict built field by field, orjson to bytes."""
    t0 = time.perf_counter()
    for i in range(n):
        payload: dict[str, object] = {"uuid": "u1", "action_type": "terminal_run", "text": TEXT}
        payload["stream"] = "stdout"
        payload["offset"] = i
        b"%s%s\r\n\r\n" % (HEAD, orjson.dumps(payload))
    return (time.perf_counter() - t0) / n


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=200_000)
    n = parser.parse_args().n
    rounds: dict[str, list[float]] = {"DeltaEvent": [], "dict + orjson": []}
    for _ in range(7):  # alternated, so that both see the same machine
        rounds["DeltaEvent"].append(typed(n))
        rounds["dict + orjson"].append(plain(n))
    med = {name: statistics.median(v) * 1e6 for name, v in rounds.items()}
    for name, us in med.items():
        print(f"{name:>14}: {us:.2f} µs per delta (median of 7 rounds of {n:,})")
    ratio = med["DeltaEvent"] / med["dict + orjson"]
    extra = (med["DeltaEvent"] - med["dict + orjson"]) * 200 / 1000
    print(f"ratio {ratio:.2f}x; per run of ~200 deltas: {extra:+.2f} ms")


if __name__ == "__main__":
    main()
