"""What a provider's prompt cache can serve of a run's prompts, and what the input is billed.

`uv run python bench/bench_cache.py [--base <commit>] [--svg docs/cache_prompt_sizes.svg]`.
Prints, never asserts.

Four runs (docs/figures.md "Prompt cache"): a one-file goal; 3 tasks x 4 steps; one task of
30 steps whose commands print 4 KB each; a follow-up goal in the first run's conversation.
Each goes through the whole app (its own model client, over HTTP) to the fake model
(tests/fakellm.py) with its cache simulation on (tests/cachesim.py, tokens counted with
tiktoken's o200k_base), twice: as `openai/gpt-4o-mini` (the lean client; OpenAI's prefix
rule: >= 1,024 tokens, 128-token steps) and as `anthropic/claude-sonnet-4-5` (litellm over
the Messages API; Anthropic's rule with the breakpoints the request carries). The same runs
are made with the code of `--base` (default: where this branch left main), extracted with
`git archive`, in the same invocation: that is the baseline.

Per run: model calls, input tokens, the token-weighted share the cache served, and the
billed equivalent of the input (uncached x 1 + written x 1.25 + read x 0.1), under each rule;
the prompt size of every call; for this code, whether the usage the app stored equals what
the fake model reported.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tarfile
import tempfile
from dataclasses import dataclass
from io import BytesIO
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from tests.agent.scripts import finish, plan_reply, run, write  # noqa: E402
from tests.fakellm import FakeModelServer  # noqa: E402

MODELS = {"openai": "openai/gpt-4o-mini", "anthropic": "anthropic/claude-sonnet-4-5-20250929"}
ROUTE = '{"task_type": "code_generation", "needs_tools": true}'

# the app, driven in a child process whose `backend` is the tree under test (this one or
# the baseline's): posts the goals in one conversation, prints what the API says it spent
CHILD = r"""
import json, os, sys, tempfile
from pathlib import Path
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
from starlette.testclient import TestClient
from backend.app import create_app
from backend.config import Settings
from tests.sse_client import collect
args = json.loads(sys.argv[1])
if args.get("condense_at"):  # a variant of this code: another condensation threshold
    import backend.agent.transcript as transcript
    transcript.CONDENSE_AT = int(args["condense_at"])
tmp = Path(tempfile.mkdtemp(prefix="planact-bench-cache-"))
settings = Settings(
    _env_file=None, database_url=f"sqlite:///{tmp}/db.sqlite", workspace_dir=tmp / "ws",
    llm_model=args["model"], llm_api_key="sk-bench", llm_base_url=args["base_url"],
    frontend_dist=tmp / "no-ui", llm_max_retries=0, run_max_tokens=None,
    max_steps_per_task=40,
)
statuses, cid = [], None
with TestClient(create_app(settings), base_url="http://127.0.0.1") as client:
    for goal in args["goals"]:
        body = {"goal": goal, "mode": "auto"}
        if cid:
            body["conversation_id"] = cid
        with client.stream("POST", "/api/agent/run", json=body) as resp:
            if resp.status_code != 200:
                raise SystemExit(f"POST /api/agent/run: {resp.status_code} {resp.read()[:500]!r}")
            _messages, end = collect(resp.iter_lines())
            cid = resp.headers["x-conversation-id"]
        statuses.append((end or {}).get("status", "?"))
        if statuses[-1] != "completed":
            said = [m["content"][:400] for m in _messages if m["meta"]["action_type"] == "error"]
            print("run ended:", statuses[-1], said, file=sys.stderr)
    detail = client.get(f"/api/conversations/{cid}").json()
runs = [r.get("usage") for r in detail["runs"]]
print("BENCH-RESULT " + json.dumps({"statuses": statuses, "runs": runs}))
"""


@dataclass
class Scenario:
    name: str
    goals: list[str]
    replies: list[dict[str, Any]]
    measured_goal: int = 0  # which goal's calls are measured (the follow-up: the second)


def _one_file(goal_no: int = 0) -> list[dict[str, Any]]:
    name = "welcome.py" if goal_no == 0 else "greet.py"
    return [
        {"stage": "route", "content": ROUTE},
        {"stage": "planning", "content": plan_reply(f"Write {name}")},
        {
            "stage": "thinking",
            "content": write(name, "print('welcome')\n")
            + run(f"python3 {name}")
            + finish(f"Wrote {name}."),
        },
    ]


def _tasks_by_steps() -> list[dict[str, Any]]:
    replies = [
        {"stage": "route", "content": ROUTE},
        {"stage": "planning", "content": plan_reply("Module a", "Module b", "Module c")},
    ]
    for t in "abc":
        for s in range(3):
            body = "".join(f"def f_{t}{s}_{i}(x):\n    return x * {i} + {s}\n\n" for i in range(12))
            path = f"pkg/{t}{s}.py"
            replies.append(
                {"stage": "thinking", "content": write(path, body) + run(f"python3 {path}")}
            )
        replies.append(
            {"stage": "thinking", "content": run("ls pkg") + finish(f"Module {t} written.")}
        )
    replies.append({"stage": "summary", "content": "Three modules written."})
    return replies


def _thirty_steps() -> list[dict[str, Any]]:
    replies = [
        {"stage": "route", "content": ROUTE},
        {"stage": "planning", "content": plan_reply("Inspect the data")},
    ]
    for s in range(29):
        # 55 lines of ~75 characters: ~4 KB of output a step
        line = f"'row %02d of step {s:02d}: ' % i + 'x' * 58"
        command = f"python3 -c \"print('\\n'.join({line} for i in range(55)))\""
        replies.append({"stage": "thinking", "content": run(command)})
    replies.append({"stage": "thinking", "content": finish("Inspected.")})
    return replies


SCENARIOS = [
    Scenario("one-file goal", ["Make welcome.py print a greeting"], _one_file()),
    Scenario("3 tasks x 4 steps", ["Build a small package of three modules"], _tasks_by_steps()),
    Scenario(
        "one task, 30 steps, 4 KB outputs", ["Inspect the data step by step"], _thirty_steps()
    ),
    Scenario(
        "follow-up goal",
        ["Make welcome.py print a greeting", "Now add greet.py that greets by name"],
        _one_file() + _one_file(1),
        measured_goal=1,
    ),
]


@dataclass
class Figures:
    calls: int
    input_tokens: int
    read: int
    written: int
    sizes: list[int]
    statuses: list[str]
    stored: list[dict[str, Any]]

    @property
    def share(self) -> float:
        return self.read / self.input_tokens if self.input_tokens else 0.0

    @property
    def billed(self) -> float:
        plain = self.input_tokens - self.read - self.written
        return plain + 1.25 * self.written + 0.1 * self.read


def measure(
    fake: FakeModelServer, tree: Path, rule: str, scenario: Scenario, condense_at: int = 0
) -> Figures:
    fake.model.reset()
    fake.model.cache = fake.model.cache or None
    from tests.cachesim import AnthropicCache, OpenAICache

    fake.model.cache = (OpenAICache(), AnthropicCache())
    fake.script(*scenario.replies)
    args = {
        "model": MODELS[rule],
        "base_url": fake.base_url,
        "goals": scenario.goals,
        "condense_at": condense_at,
    }
    env = {**os.environ, "PYTHONPATH": str(tree), "LOG_LEVEL": "ERROR"}
    done = subprocess.run(
        [sys.executable, "-c", CHILD, json.dumps(args)],
        cwd=tree,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    line = next((x for x in done.stdout.splitlines() if x.startswith("BENCH-RESULT ")), None)
    if "run ended:" in done.stderr:
        print(done.stderr[done.stderr.index("run ended:") :][:800], file=sys.stderr)
    if line is None:
        raise SystemExit(f"the run failed ({tree}):\n{done.stdout[-2000:]}\n{done.stderr[-4000:]}")
    result = json.loads(line.removeprefix("BENCH-RESULT "))
    calls = [c for c in fake.model.calls if c.get("usage") is not None]
    if scenario.measured_goal:
        # the follow-up's calls: those after the first goal's (its route call opens them)
        starts = [i for i, c in enumerate(calls) if c["stage"] == "route"]
        calls = calls[starts[scenario.measured_goal] :]
    usages = [c["usage"] for c in calls]
    return Figures(
        calls=len(calls),
        input_tokens=sum(u.input_tokens for u in usages),
        read=sum(u.cache_read for u in usages),
        written=sum(u.cache_write for u in usages),
        sizes=[u.input_tokens for u in usages],
        statuses=result["statuses"],
        stored=result["runs"][scenario.measured_goal :][:1],
    )


def extract(commit: str) -> Path:
    """The tree of ``commit`` in a temporary folder (git archive: the repository is left
    as it is)."""
    data = subprocess.run(
        ["git", "archive", "--format=tar", commit], cwd=ROOT, capture_output=True, check=True
    ).stdout
    folder = Path(tempfile.mkdtemp(prefix="planact-bench-base-"))
    with tarfile.open(fileobj=BytesIO(data)) as tar:
        tar.extractall(folder, filter="data")
    return folder


def default_base() -> str:
    found = subprocess.run(
        ["git", "merge-base", "HEAD", "main"], cwd=ROOT, capture_output=True, text=True
    )
    return found.stdout.strip() or "HEAD"


def svg(curves: dict[str, list[int]], path: Path) -> None:
    """The prompt size of each call of the 30-step run, one line per code and rule."""
    width, height, pad = 640, 320, 48
    top = max(max(v) for v in curves.values())
    longest = max(len(v) for v in curves.values())
    colors = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728"]
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        'font-family="sans-serif" font-size="11">',
        f'<rect width="{width}" height="{height}" fill="white"/>',
        f'<text x="{pad}" y="18">Prompt tokens per model call, one task of 30 steps '
        "(4 KB outputs)</text>",
        f'<line x1="{pad}" y1="{height - pad}" x2="{width - 10}" y2="{height - pad}" '
        'stroke="#999"/>',
        f'<line x1="{pad}" y1="{pad - 20}" x2="{pad}" y2="{height - pad}" stroke="#999"/>',
        f'<text x="{pad - 4}" y="{pad - 16}" text-anchor="end">{top:,}</text>',
        f'<text x="{pad - 4}" y="{height - pad}" text-anchor="end">0</text>',
        f'<text x="{width - 10}" y="{height - pad + 16}" text-anchor="end">call {longest}</text>',
    ]
    for n, (label, values) in enumerate(curves.items()):
        points = " ".join(
            f"{pad + i * (width - pad - 10) / max(1, longest - 1):.1f},"
            f"{height - pad - v * (height - 2 * pad + 20) / top:.1f}"
            for i, v in enumerate(values)
        )
        color = colors[n % len(colors)]
        parts.append(f'<polyline fill="none" stroke="{color}" stroke-width="2" points="{points}"/>')
        parts.append(f'<text x="{pad + 10}" y="{pad + n * 14}" fill="{color}">{label}</text>')
    parts.append("</svg>")
    path.write_text("\n".join(parts) + "\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--base", default=None, help="the baseline's commit (default: merge-base with main)"
    )
    parser.add_argument("--svg", type=Path, default=None, help="write the prompt-size plot here")
    parser.add_argument("--only", default="", help="run only scenarios whose name contains this")
    parser.add_argument(
        "--condense-at",
        default="",
        help="also run this code with these CONDENSE_AT values (comma-separated characters)",
    )
    args = parser.parse_args()
    base = args.base or default_base()
    trees: dict[str, tuple[Path, int]] = {"this": (ROOT, 0)}
    for value in filter(None, args.condense_at.split(",")):
        trees[f"this @{int(value) // 1000}k"] = (ROOT, int(value))
    trees[f"base {base[:8]}"] = (extract(base), 0)
    fake = FakeModelServer().start()
    results: dict[tuple[str, str, str], Figures] = {}
    try:
        for scenario in SCENARIOS:
            if args.only and args.only not in scenario.name:
                continue
            for code, (tree, condense_at) in trees.items():
                for rule in MODELS:
                    results[(scenario.name, code, rule)] = measure(
                        fake, tree, rule, scenario, condense_at
                    )
    finally:
        fake.stop()
    print("tokens: tiktoken o200k_base of every prompt the fake model received")
    print("billed: input as uncached x 1 + written x 1.25 + read x 0.1 (OpenAI writes nothing)")
    header = (
        f"{'run':34} {'code':14} {'calls':>5} {'input':>9} {'OpenAI share':>12} {'billed':>9} "
        f"{'Anthropic share':>15} {'billed':>9}"
    )
    print(header)
    for scenario in SCENARIOS:
        for code in trees:
            o = results.get((scenario.name, code, "openai"))
            a = results.get((scenario.name, code, "anthropic"))
            if o is None or a is None:
                continue
            print(
                f"{scenario.name:34} {code:14} {o.calls:>5} {o.input_tokens:>9,} "
                f"{o.share:>12.3f} {o.billed:>9,.0f} {a.share:>15.3f} {a.billed:>9,.0f}"
                + (
                    ""
                    if set(o.statuses + a.statuses) == {"completed"}
                    else f"  ({o.statuses} {a.statuses})"
                )
            )
        this = [results.get((scenario.name, "this", r)) for r in MODELS]
        old = [
            results.get((scenario.name, c, r))
            for c in trees
            if c.startswith("base")
            for r in MODELS
        ]
        if all(this) and all(old):
            ratios = [
                f"{t.billed / b.billed:.2f}x" for t, b in zip(this, old, strict=True) if t and b
            ]
            print(f"{'':34} {'this / base':14} billed: OpenAI {ratios[0]}, Anthropic {ratios[1]}")
    for scenario in SCENARIOS:
        for rule in MODELS:
            f = results.get((scenario.name, "this", rule))
            if f is None or not f.stored:
                continue
            stored = f.stored[0] or {}
            same = (
                stored.get("input_tokens"),
                stored.get("cached_input_tokens"),
                stored.get("cache_write_tokens"),
            ) == (
                f.input_tokens,
                f.read,
                f.written,
            )
            print(
                f"stored by the app, {scenario.name}, {rule}: "
                f"input {stored.get('input_tokens')}, cached {stored.get('cached_input_tokens')}, "
                f"written {stored.get('cache_write_tokens')}, ${stored.get('cost_usd')}"
                + (" = reported" if same else " != reported")
            )
    for scenario in SCENARIOS:
        for code in trees:
            f = results.get((scenario.name, code, "openai"))
            if f is not None:
                print(f"prompt tokens per call, {scenario.name}, {code}: {f.sizes}")
    thirty = "one task, 30 steps, 4 KB outputs"
    if args.svg is not None and (thirty, "this", "openai") in results:
        # the same text goes out under both rules: one line per code
        curves = {code: results[(thirty, code, "openai")].sizes for code in trees}
        svg(curves, args.svg)
        print(f"plot: {args.svg}")


if __name__ == "__main__":
    main()
