"""MCP figures: `uv run python bench/bench_mcp.py`. Prints, never asserts.

1. Call overhead on a warm stdio server: our McpManager.call (name parsing, JSON arguments,
   tool lookup, timeout, the pump between transport and session, result conversion and
   capping) against a bare SDK ClientSession.call_tool on another process of the same
   server, calls interleaved in the same run. Goal: the manager's p50 overhead <= 5 ms.
2. A streamable HTTP server restarted between two calls: the time from the moment the new
   process accepts connections to the end of the next (successful) call, which finds the
   old session refused (404), starts a new session and sends the call again; against calls
   with no restart to the same server in the same run. Goal: the next call succeeds, with
   <= 1 s of added latency.
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
from tests.support.mcp import HttpServerProcess

SERVER = (
    Path(__file__).resolve().parent.parent
    / "tests"
    / "tools"
    / "mcp"
    / "servers"
    / "tools_server.py"
)
WARMUP, CALLS = 50, 500
RESTARTS, PLAIN = 10, 20  # restarts of the HTTP server; calls with no restart around each


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


async def restarts() -> None:
    server = HttpServerProcess()
    server.start()
    manager = McpManager(parse_servers({"mcpServers": {"web": {"url": server.url}}}))
    plain: list[float] = []
    healed: list[float] = []
    failed = 0
    try:
        assert (await manager.call("web__add", '{"a": 1, "b": 1}')).ok  # the first session
        for _ in range(RESTARTS):
            for _ in range(PLAIN):
                t0 = time.perf_counter()
                ok = (await manager.call("web__add", '{"a": 1, "b": 1}')).ok
                plain.append((time.perf_counter() - t0) * 1000)
                assert ok
            server.kill()
            await asyncio.to_thread(server.start)  # returns once the new process accepts
            t0 = time.perf_counter()
            result = await manager.call("web__add", '{"a": 1, "b": 1}')
            healed.append((time.perf_counter() - t0) * 1000)
            failed += not result.ok
    finally:
        await manager.aclose()
        server.kill()
    print(f"\nMCP streamable HTTP server restarted between two calls ({RESTARTS} restarts, ms)")
    print(f"{'':34}{'p50':>9}{'max':>9}")
    for label, xs in (("call, no restart", plain), ("first call after the restart", healed)):
        print(f"{label:34}{pct(xs, 0.5):9.1f}{max(xs):9.1f}")
    added = pct(healed, 0.5) - pct(plain, 0.5)
    worst = max(healed) - pct(plain, 0.5)
    print(
        f"succeeded {RESTARTS - failed}/{RESTARTS}; added latency p50 {added:+.1f} ms, "
        f"max {worst:+.1f} ms (goal: succeeds, <= 1000 ms added)"
    )


if __name__ == "__main__":
    asyncio.run(main())
    asyncio.run(restarts())
