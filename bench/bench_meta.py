"""The cost of typed meta.json: a message built from payload models against the same message
built from the dicts it stores (the way every writer built it before), and a stored message
loaded back (its items stay the JSON they are).

  uv run python bench/bench_meta.py [--rounds 20000]

Each figure is CPU microseconds per message (the best of 5 repeats), for three kinds: a
plan of 5 tasks, a finished command, an approval. The baseline, measured in the same run:
building from the dicts. The writers' JSON is the same either way
(tests/messages/test_meta_payloads.py).
"""

from __future__ import annotations

import argparse
import sys
import timeit
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from pydantic import BaseModel

from backend.actions.registry.builtin.terminal_run import CommandRun
from backend.messages.message import Message
from backend.messages.payloads import ApprovalRequest, ApprovalShown, PlanTask, plain_items

TASKS = [
    PlanTask(
        id=f"{i:012x}",
        title=f"Task {i}",
        description="Do it " * 10,
        requirement="x",
        status="pending",
    )
    for i in range(5)
]
COMMAND = CommandRun(
    command="python3 app.py",
    exit_code=0,
    stdout="line of output\n" * 200,
    stderr="",
    timed_out=False,
    note="",
)
APPROVAL = ApprovalRequest(
    action_type="terminal_run",
    class_="terminal",
    params={"command": "rm -rf build", "cwd": "."},
    digest="sha256:" + "0" * 64,
    shown=ApprovalShown(whole=True, note="", lines=1, chars=12),
)
CASES: dict[str, tuple[str, list[BaseModel]]] = {
    "plan (5 tasks)": ("plan", list(TASKS)),
    "terminal_run": ("terminal_run", [COMMAND]),
    "approval": ("approval", [APPROVAL]),
}


def per_message_us(fn: Any, rounds: int) -> float:
    return min(timeit.repeat(fn, number=rounds, repeat=5)) / rounds * 1e6


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=20_000)
    args = ap.parse_args()
    print(f"{'kind':<16}{'dicts µs':>10}{'models µs':>11}{'ratio':>7}{'load µs':>9}")
    for label, (kind, models) in CASES.items():
        dicts: list[Any] = plain_items(models)
        stored = Message.build(kind, "x", json=dicts).to_dict()
        base = per_message_us(lambda k=kind, d=dicts: Message.build(k, "x", json=d), args.rounds)
        typed = per_message_us(lambda k=kind, m=models: Message.build(k, "x", json=m), args.rounds)
        load = per_message_us(lambda s=stored: Message.from_dict(s), args.rounds)
        print(f"{label:<16}{base:>10.2f}{typed:>11.2f}{typed / base:>7.2f}{load:>9.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
