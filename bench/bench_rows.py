"""What typed store rows and run state cost on their hot paths. Prints, never asserts.

  uv run python bench/bench_rows.py [--base-tree DIR]

1. A run row as the store builds it on every ``get_run`` (the feed and ``wait`` read it
   once per wake-up): ``RunRow`` now, against the dict the store built before (its code,
   kept here as the baseline), in the same run; and a whole ``Store.get_run`` on SQLite for
   scale.
2. A task's turn as every checkpoint rebuilds it (one per message a run publishes):
   ``StoredTurn`` now against the dict before, in the same run.
3. A parked run's checkpoint (tests/agent/data, as the code before typing stored it):
   ``RunState.to_json`` (with every message a run publishes) and ``from_json`` (on resume).
   With ``--base-tree`` (a checkout of an earlier commit, e.g. ``git worktree add /tmp/base
   d16b93c``) the same is timed there by the same interpreter, alternated with this tree's.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
import timeit
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
FIXTURE = ROOT / "tests" / "agent" / "data" / "checkpoints_before_typing.json"


def best_us(fn: Any, number: int, repeat: int = 7) -> float:
    return min(timeit.repeat(fn, number=number, repeat=repeat)) / number * 1e6


def state_figures() -> tuple[float, float]:
    """(to_json, from_json) in µs for the fixture's parked checkpoint, in this process's tree."""
    from backend.agent.state import RunState

    stored = json.loads(FIXTURE.read_text())
    cp, turns = stored["parked"]["checkpoint"], stored["parked"]["transcript"]
    state = RunState.from_json(cp, turns=turns)
    return best_us(state.to_json, 2000), best_us(lambda: RunState.from_json(cp, turns=turns), 2000)


def turn_figures() -> tuple[float, float]:
    """A task's turn as every checkpoint rebuilds it: the dict built before (its code, kept
    here as the baseline) against ``stored_turn`` now, in µs."""
    from backend.actions.model import Action
    from backend.agent.transcript import Outcome, Turn, stored_turn

    turn = Turn(
        reply="<think>first</think>" + "y" * 400,
        actions=[
            Action("terminal_run", {"command": "ls -la"}),
            Action("write_code", {"path": "a.py", "content": "print(1)\n" * 50}),
        ],
        outcomes=[Outcome("terminal_run: ls -la", "ok", "z" * 2000), Outcome("a.py", "ok", "")],
        footer="All actions ran.",
    )

    def as_dict() -> dict[str, Any]:  # transcript.turn_dict before (the baseline)
        return {
            "reply": turn.reply,
            "actions": [
                {"type": a.type, "params": dict(a.params), "warnings": list(a.warnings)}
                for a in turn.actions
            ],
            "outcomes": [[o.label, o.verdict, o.content] for o in turn.outcomes],
            "footer": turn.footer,
            "format_error": turn.format_error,
            "brief_error": turn.brief_error,
        }

    return best_us(as_dict, 20_000), best_us(lambda: stored_turn(turn), 20_000)


def row_figures() -> tuple[float, float]:
    from backend.store.base import iso
    from backend.store.runs import run_row
    from backend.store.shapes import RunRow
    from backend.store.tables import Run

    r = Run(
        **{"id": "r" * 32, "conversation_id": "c" * 32, "goal": "g", "mode": "agent"},
        **{"runtime": "local", "status": "running", "error": "", "task_type": "", "model": ""},
        **{"created_at": datetime.now(UTC), "ended_at": None, "owner": "serve-x"},
        **{"stop_requested": False, "resumes": 0, "repeated_calls": 0, "approval": "never"},
        **{"mcp_servers": '["calc"]', "can_ask": True, "wait_uuid": "u" * 32},
        wait_kind="approval",
    )

    def as_dict() -> dict[str, Any]:  # the store's run_dict before (the baseline)
        waiting = r.status == "running" and r.wait_uuid
        return {
            **{"run_id": r.id, "conversation_id": r.conversation_id, "goal": r.goal},
            **{"mode": r.mode, "runtime": r.runtime, "error": r.error, "model": r.model},
            "status": "waiting" if waiting else r.status,
            "task_type": r.task_type,
            **{"created_at": iso(r.created_at), "ended_at": iso(r.ended_at), "owner": r.owner},
            "stop_requested": bool(r.stop_requested),
            **{"resumes": r.resumes or 0, "repeated_calls": r.repeated_calls or 0},
            "mcp_servers": None if r.mcp_servers is None else json.loads(r.mcp_servers),
            "approval": r.approval or "never",
            "can_ask": True if r.can_ask is None else bool(r.can_ask),
            "wait": None if not r.wait_uuid else {"uuid": r.wait_uuid, "kind": r.wait_kind},
        }

    return best_us(as_dict, 20_000), best_us(lambda: run_row(r, RunRow), 20_000)


async def get_run_us() -> float:
    from backend.store.repo import Store

    with tempfile.TemporaryDirectory() as d:
        store = Store(f"sqlite:///{d}/bench.db")
        store.migrate()
        cid = await store.create_conversation("1", "t")
        rid = await store.start_run("1", cid, "g", "agent", "local", owner="x")
        for _ in range(200):
            await store.get_run(rid)
        times = []
        for _ in range(5):
            t = time.perf_counter()
            for _ in range(1000):
                await store.get_run(rid)
            times.append((time.perf_counter() - t) / 1000 * 1e6)
        await store.close()
        return min(times)


def other_tree(tree: Path) -> tuple[float, float]:
    env = {**os.environ, "PYTHONPATH": str(tree)}
    out = subprocess.run(
        [sys.executable, __file__, "--state-only"],
        env=env,
        cwd=tree,
        capture_output=True,
        text=True,
        check=True,
    )
    to_json, from_json = json.loads(out.stdout)
    return float(to_json), float(from_json)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--base-tree", type=Path)
    parser.add_argument("--state-only", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.state_only:  # the other tree's figures, for --base-tree
        print(json.dumps(state_figures()))
        return
    sys.path.insert(0, str(ROOT))
    before, now = row_figures()
    print(f"run row: dict (before) {before:.2f} µs, RunRow {now:.2f} µs ({now / before:.2f}x)")
    print(f"Store.get_run on SQLite, whole: {asyncio.run(get_run_us()):.0f} µs")
    before, now = turn_figures()
    print(f"a turn per checkpoint: dict (before) {before:.2f} µs, StoredTurn {now:.2f} µs")
    for _ in range(2):
        if args.base_tree is not None:
            w, r = other_tree(args.base_tree)
            print(f"checkpoint, base tree: to_json {w:.1f} µs, from_json {r:.1f} µs")
        w, r = state_figures()
        print(f"checkpoint, this tree: to_json {w:.1f} µs, from_json {r:.1f} µs")


if __name__ == "__main__":
    main()
