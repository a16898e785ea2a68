"""CPU seconds of a process start's imports: `python -c "import backend.app"` in a fresh
interpreter, the median of several, alternated with the same at another commit when given.

    uv run python bench/bench_import.py [--base REF] [--repeats 7]

Every `planact serve`, worker and CLI process pays it, and the test suite starts some 200
servers. ``--base REF`` takes REF's ``backend/`` (``git archive``) into a temporary folder
and imports it first on the path; the same interpreter and packages for both.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CHECK = "import sys, backend.app; assert backend.app.__file__.startswith(sys.argv[1])"


def import_cpu(tree: Path) -> float:
    """CPU seconds (user + system) of importing backend.app from ``tree``."""
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True", "PYTHONPATH": str(tree)}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run([sys.executable, "-c", CHECK, str(tree)], env=env, check=True, cwd=tree)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime


def summary(label: str, values: list[float]) -> str:
    spread = f"{min(values):.2f}-{max(values):.2f}"
    return f"{label}: median {statistics.median(values):.2f} s ({spread})"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", help="also measure the imports at this commit")
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="planact-bench-import-") as tmp:
        trees = {"now": ROOT}
        if args.base:
            archive = subprocess.run(
                ["git", "archive", args.base, "backend"], cwd=ROOT, capture_output=True, check=True
            ).stdout
            subprocess.run(["tar", "-x", "-C", tmp], input=archive, check=True)
            trees["base"] = Path(tmp)
        for tree in trees.values():  # a first import compiles the bytecode: not counted
            import_cpu(tree)
        found: dict[str, list[float]] = {name: [] for name in trees}
        for _ in range(args.repeats):
            for name, tree in trees.items():
                found[name].append(import_cpu(tree))
    print(f"import backend.app, CPU seconds, {args.repeats} alternated starts each")
    for name, values in found.items():
        print("  " + summary(name if name == "now" else f"base {args.base}", values))
    if "base" in found:
        ratio = statistics.median(found["now"]) / statistics.median(found["base"])
        print(f"  now / base: {ratio:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
