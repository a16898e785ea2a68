"""Parse-time figures: `uv run python bench/bench_parse.py`. Prints, never asserts.

Also hostile replies: a 5 MB reply of `<write_code>` openers (refused at
the size cap now; main scanned it, timed here as the same scan without the cap), the
largest such reply under the cap, and how long the event loop stalls while one is read
(main parsed on the loop; the task loop now reads big replies on a worker thread).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from backend.actions import FormatError, builtin_registry, parse_actions
from backend.actions.model import MAX_REPLY_CHARS
from backend.actions.scanner import Scanner
from backend.agent.task_loop import read_reply
from backend.llm.base import Completion
from tests.actions.corpus import CASES as BASE_CASES
from tests.actions.corpus_markers import MARKER_CASES

CASES = [*BASE_CASES, *MARKER_CASES]

LINE = "    if a < b and c > d:  # compare & branch\n        total += values[i] * 2\n"


def big_reply(kind: str, size: int = 100_000) -> str:
    if kind == "plain":
        body = LINE * (size // len(LINE))
    elif kind == "quoted-closers":
        chunk = LINE + '    TAIL = "</content></write_code>"\n'
        body = chunk * (size // len(chunk))
    elif kind == "many-actions":
        one = "<terminal_run><command>echo hi 2>&1</command></terminal_run>\n"
        return "Running them all.\n" + one * (size // len(one))
    else:
        raise ValueError(kind)
    return (
        "<think>\nI will write the module in one go.\n</think>\nHere it is:\n\n"
        f"<write_code>\n<path>src/big.py</path>\n<content>\ndef f():\n{body}</content>\n"
        "</write_code>\n\n<terminal_run><command>python3 src/big.py</command></terminal_run>\n"
    )


HOSTILE = {
    "unclosed openers": "<write_code " * 9000,
    "JSON starts": '{"a' * 30000,
    "stray </think>": "</think>" * 12000,
    "unclosed <think>": "<think>" * 14000,
    "bare mentions": "<finish> " * 11000,
    "stray </content>": "<write_code><path>a</path><content>" + "</content>\n" * 8000,
    "open <parameter=>": "<function=write_code>" + "<parameter=content>\n" * 5000,
    "<!-- unclosed": "<!--" * 25000,
    "`a on one line": "`a" * 50000,
    "nested JSON": '{"name": ' * 11000,
    "Mistral markers": "[TOOL_CALLS]a[ARGS]" * 5000,
    "Kimi markers": "<|tool_call_begin|>functions.a:0<|tool_call_argument_begin|>" * 1600,
    "unclosed <think> + acts": "<think>" + "<read_file><path>a</path></read_file>\n" * 2600,
}


def timeit(fn: Callable[[], object], repeat: int) -> tuple[float, float]:
    fn()  # warm up (regex compilation)
    runs = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        runs.append(time.perf_counter() - t0)
    return statistics.median(runs) * 1e3, min(runs) * 1e3


def corpus_once() -> None:
    for case in CASES:
        with contextlib.suppress(FormatError):
            parse_actions(case.text, finish_reason=case.finish_reason, tool_calls=case.tool_calls)


def _quiet(text: str) -> None:
    with contextlib.suppress(FormatError):
        parse_actions(text)


def main() -> None:
    for kind in ("plain", "quoted-closers", "many-actions"):
        text = big_reply(kind)
        n = len(parse_actions(text))
        med, best = timeit(functools.partial(parse_actions, text), 50)
        print(
            f"100 KB reply ({kind:14}, {len(text) / 1000:.0f} KB, {n:4} actions): "
            f"median {med:.3f} ms, best {best:.3f} ms"
        )
    for name, text in HOSTILE.items():
        med, best = timeit(functools.partial(_quiet, text), 5)
        print(f"hostile ~100 KB ({name:18}): median {med:.1f} ms, best {best:.1f} ms")
    med, best = timeit(corpus_once, 50)
    print(
        f"whole corpus ({len(CASES)} replies): median {med:.3f} ms, best {best:.3f} ms "
        f"({med / len(CASES) * 1e3:.0f} µs per reply)"
    )


async def _stall(work: Callable[[], object]) -> tuple[float, float]:
    """(max event-loop lag in ms, duration in ms) while `work` (a coroutine factory) runs,
    measured by a ticker that asks to wake every millisecond."""
    lags: list[float] = []
    done = asyncio.Event()

    async def ticker() -> None:
        while not done.is_set():
            t0 = time.perf_counter()
            await asyncio.sleep(0.001)
            lags.append(time.perf_counter() - t0 - 0.001)

    tick = asyncio.create_task(ticker())
    await asyncio.sleep(0.01)
    t0 = time.perf_counter()
    await work()  # type: ignore[misc]
    took = time.perf_counter() - t0
    done.set()
    await tick
    return max(lags) * 1e3, took * 1e3


def hostile() -> None:
    five = "<write_code>" * (5_000_000 // 12)
    t0 = time.perf_counter()
    with contextlib.suppress(FormatError):
        parse_actions(five)
    now = time.perf_counter() - t0
    t0 = time.perf_counter()
    Scanner(five, builtin_registry().vocabulary).run()
    uncapped = time.perf_counter() - t0
    print(
        f"5 MB of <write_code> openers: {now * 1e3:.2f} ms now (size cap: format error); "
        f"the uncapped scan main ran: {uncapped * 1e3:,.0f} ms ({uncapped / now:,.0f}x)"
    )
    under = "<write_code>" * ((MAX_REPLY_CHARS - 12) // 12)
    med, best = timeit(lambda: _quiet(under), 3)
    print(
        f"{len(under) / 1e6:.2f} MB of openers (largest under the cap): median {med:,.0f} ms, "
        f"best {best:,.0f} ms (read on a worker thread)"
    )

    async def inline() -> None:
        _quiet(under)

    async def threaded() -> None:
        await read_reply(Completion(text=under), builtin_registry().vocabulary)

    lag_inline, took_inline = asyncio.run(_stall(inline))
    lag_thread, took_thread = asyncio.run(_stall(threaded))
    print(
        f"event-loop stall while reading it: on the loop (main) {lag_inline:,.0f} ms of "
        f"{took_inline:,.0f} ms; off the loop (now) max lag {lag_thread:.1f} ms of "
        f"{took_thread:,.0f} ms ({lag_inline / max(lag_thread, 0.001):,.0f}x less)"
    )


if __name__ == "__main__":
    main()
    hostile()
