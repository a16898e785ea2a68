"""Tokens per run on a 10-turn task with big outputs: full history (what main resent) vs
the lean history. `uv run python bench/bench_tokens.py`. Prints, never asserts.

One task, nine turns that each write a ~8 KB file and run a command printing ~12 KB, then
a finish: run twice through the real app (ScriptedLLM, local runtime), once with every turn
resent whole (KEEP_WHOLE unbounded: main's behaviour) and once as shipped. Tokens are
estimated as characters / 4 of every message sent, the same way for both.
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from starlette.testclient import TestClient

from backend.agent import transcript
from backend.app import create_app
from backend.config import Settings
from backend.llm.base import Completion
from backend.llm.testing import ScriptedLLM
from tests.agent.scripts import finish, plan_reply, run, write
from tests.sse_client import collect

TURNS = 10
FILE = "".join(f"    value_{i} = compute({i}) * 2  # step {i}\n" for i in range(180))  # ~8 KB
PRINT = "python3 -c \"print('\\n'.join('row %d: ' % i + 'x' * 110 for i in range(100)))\""


def _tokens(messages: list[dict[str, Any]]) -> int:
    return sum(len(str(m.get("content", ""))) for m in messages) // 4


def _reply(text: str, sizes: list[int]):  # type: ignore[no-untyped-def]
    def answer(messages: list[dict[str, Any]]) -> Completion:
        sizes.append(_tokens(messages))
        return Completion(
            text=text,
            finish_reason="stop",
            prompt_tokens=sizes[-1],
            completion_tokens=len(text) // 4,
        )

    return answer


def one_run(keep_whole: int) -> tuple[int, list[int], str]:
    transcript.KEEP_WHOLE = keep_whole
    sizes: list[int] = []
    script: list[tuple[str, Any]] = [("planning", plan_reply("Build the module"))]
    for i in range(TURNS - 1):
        body = f"def part_{i}():\n" + FILE
        script.append(("thinking", _reply(write(f"pkg/part_{i}.py", body) + run(PRINT), sizes)))
    script.append(("thinking", _reply(finish("built"), sizes)))
    tmp = Path(tempfile.mkdtemp(prefix="planact-bench-tokens-"))
    settings = Settings(
        _env_file=None,
        database_url=f"sqlite:///{tmp}/db.sqlite",
        workspace_dir=tmp / "ws",
        llm_model="scripted/model",
        frontend_dist=tmp / "no-ui",
    )
    llm = ScriptedLLM(script)
    with TestClient(create_app(settings, llm=llm)) as client:
        goal = {"goal": "build the module", "mode": "agent"}
        with client.stream("POST", "/api/agent/run", json=goal) as resp:
            _messages, end = collect(resp.iter_lines())
            cid = resp.headers["x-conversation-id"]
        total = client.get(f"/api/conversations/{cid}").json()["total_tokens"]
    assert not llm.errors, llm.errors
    return int(total), sizes, str(end["status"] if end else "?")


def main() -> None:
    shipped = transcript.KEEP_WHOLE
    before, before_sizes, s1 = one_run(10**9)
    after, after_sizes, s2 = one_run(shipped)
    transcript.KEEP_WHOLE = shipped
    print(f"{TURNS}-turn task, ~8 KB written and ~11 KB printed per turn (tokens = chars / 4)")
    print(f"  full history (main):  {before:>9,} tokens per run ({s1})")
    print(f"  lean history (now):   {after:>9,} tokens per run ({s2})")
    print(f"  ratio before / after: {before / after:.2f}x")
    print("  prompt tokens per thinking call, before:", before_sizes)
    print("  prompt tokens per thinking call, after: ", after_sizes)


if __name__ == "__main__":
    main()
