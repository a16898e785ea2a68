"""Parse-time figures: `uv run python bench/bench_parse.py`. Prints, never asserts."""

from __future__ import annotations

import contextlib
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from backend.actions import FormatError, parse_actions
from tests.actions.corpus import CASES

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
        med, best = timeit(lambda text=text: parse_actions(text), 50)
        print(
            f"100 KB reply ({kind:14}, {len(text) / 1000:.0f} KB, {n:4} actions): "
            f"median {med:.3f} ms, best {best:.3f} ms"
        )
    for name, text in HOSTILE.items():
        med, best = timeit(lambda text=text: _quiet(text), 5)
        print(f"hostile ~100 KB ({name:18}): median {med:.1f} ms, best {best:.1f} ms")
    med, best = timeit(corpus_once, 50)
    print(
        f"whole corpus ({len(CASES)} replies): median {med:.3f} ms, best {best:.3f} ms "
        f"({med / len(CASES) * 1e3:.0f} µs per reply)"
    )


if __name__ == "__main__":
    main()
