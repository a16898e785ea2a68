"""MCP call overhead on a warm stdio server: `uv run python bench/bench_mcp.py`.

Our McpManager.call (name parsing, JSON arguments, tool lookup, timeout, the pump between
transport and session, result conversion and capping) against a bare SDK
ClientSession.call_tool on another process of the same server, calls interleaved in the
same run. Goal: the manager's p50 overhead <= 5 ms. Prints, never asserts.
"""

from __future__ import annotations

import asyncio
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from backend.tools.mcp import McpManager, parse_servers

SERVER = (
    Path(__file__).resolve().parent.parent
    / "tests"
    / "tools"
    / "mcp"
    / "servers"
    / "tools_server.py"
)
WARMUP, CALLS = 50, 500


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def main() -> None:
    manager = McpManager(
        parse_servers({"mcpServers": {"s": {"command": sys.executable, "args": [str(SERVER)]}}})
    )
    params = StdioServerParameters(command=sys.executable, args=[str(SERVER)])
    ours: list[float] = []
    bare: list[float] = []
    try:
        async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            await session.list_tools()
            for i in range(WARMUP + CALLS):
                args = {"a": i, "b": 1}
                t0 = time.perf_counter()
                result = await manager.call("s__add", f'{{"a": {i}, "b": 1}}')
                t1 = time.perf_counter()
                raw = await session.call_tool("add", args)
                t2 = time.perf_counter()
                assert result.ok and not raw.is_error, result.content
                if i >= WARMUP:
                    ours.append((t1 - t0) * 1000)
                    bare.append((t2 - t1) * 1000)
    finally:
        await manager.aclose()
    print(f"MCP call on a warm stdio server, {CALLS} calls each, interleaved (ms)")
    print(f"{'':24}{'p50':>8}{'p99':>8}{'mean':>8}")
    for label, xs in (("bare ClientSession", bare), ("McpManager.call", ours)):
        print(f"{label:24}{pct(xs, 0.5):8.3f}{pct(xs, 0.99):8.3f}{statistics.mean(xs):8.3f}")
    over50 = pct(ours, 0.5) - pct(bare, 0.5)
    over99 = pct(ours, 0.99) - pct(bare, 0.99)
    print(f"overhead p50 {over50:+.3f} ms (goal <= 5 ms), p99 {over99:+.3f} ms")
    print(f"ratio p50 {pct(ours, 0.5) / pct(bare, 0.5):.2f}x")


if __name__ == "__main__":
    asyncio.run(main())
