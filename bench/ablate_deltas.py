"""What live deltas cost a streamed run: planact and the relay at one level of concurrent
runs, each also with a part of its delta path switched off, alternated round by round.

  uv run python bench/ablate_deltas.py [--level 50] [--rounds 4] [--switches all]

The servers (each its own process, on loopback with the fake model, SQLite): the relay
(bench/relay.py), the relay sending no deltas (``--no-deltas``), planact, and planact with
one switch each (``--switches``, comma-separated):

- ``unwanted``: nobody wants deltas (the coalescer returns at once for every piece);
- ``unpublished``: deltas are coalesced and made, but never handed to the bus;
- ``unwritten``: deltas go through the bus and the run's feed, but the stream skips them.

A switch is applied by this file in the server's own process before ``planact serve``
starts (``--serve SWITCH``, used by the bench itself): a diagnosis, not a configuration.
Each run is bench/bench_cpu.py's (a route call and a streamed answer; each call 1 s to the
first token then 400 chunks 30 ms apart). Prints per round each server's CPU per run, then
medians and the ratio to the relay. Asserts nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from bench.bench_cpu import CALLS, SHAPE  # noqa: E402
from bench.bench_stream import GOAL, ROUTE_CHAT, Fake, Proc, capacity  # noqa: E402
from tests.e2e.server import server_env  # noqa: E402
from tests.support.ports import free_port  # noqa: E402

SWITCHES = ("unwanted", "unpublished", "unwritten")


def switch_off(switch: str) -> None:
    """Applied in the server's process, before it starts."""
    if switch == "unwanted":
        from backend.agent.context import RunContext

        def nobody(self: RunContext) -> bool:
            return False

        RunContext._wants_deltas = nobody  # type: ignore[method-assign]
    elif switch == "unpublished":
        from backend.actions.values import scrub
        from backend.agent.live import Live
        from backend.messages.deltas import DeltaEvent

        def made_only(self: Live, delta: DeltaEvent) -> None:
            scrub(delta.text)

        Live._emit = made_only  # type: ignore[method-assign]
    elif switch == "unwritten":
        import backend.api.agent as agent
        from backend.api.sse import SseResponse, feed_response
        from backend.messages.deltas import DeltaEvent
        from backend.runs.feed import FeedEvent

        def without_deltas(
            feed: AsyncIterator[FeedEvent],
            headers: dict[str, str] | None = None,
            send_timeout: float | None = None,
        ) -> SseResponse[FeedEvent]:
            async def skipped() -> AsyncIterator[FeedEvent]:
                async for event in feed:
                    if not isinstance(event, DeltaEvent):
                        yield event

            return feed_response(skipped(), headers, send_timeout)

        agent.feed_response = without_deltas  # type: ignore[attr-defined]
    elif switch:
        raise SystemExit(f"unknown switch {switch!r}: one of {', '.join(SWITCHES)}")


def serve(switch: str, argv: list[str]) -> int:
    switch_off(switch)
    from backend.cli.main import main

    return main(argv)


def start(tmp: Path, name: str, argv: list[str], env: dict[str, str]) -> Proc:
    proc = Proc(name, argv, env, tmp)
    proc.wait_healthy(f"http://127.0.0.1:{argv[argv.index('--port') + 1]}/api/health")
    return proc


async def measure(level: int, rounds: int, switches: list[str]) -> None:
    with tempfile.TemporaryDirectory(prefix="planact-ablate-") as folder:
        await measure_in(Path(folder), level, rounds, switches)


async def measure_in(tmp: Path, level: int, rounds: int, switches: list[str]) -> None:
    fake = Fake(tmp)
    fake.auto(SHAPE, {"route": ROUTE_CHAT})
    servers: dict[str, tuple[Proc, str, bool]] = {}
    try:
        for name, extra in (("relay", []), ("relay, no deltas", ["--no-deltas"])):
            port = free_port()
            db = tmp / f"relay-{len(servers)}.db"
            argv = [sys.executable, str(ROOT / "bench" / "relay.py"), "--port", str(port)]
            argv += ["--model-url", fake.url, "--db", str(db), *extra]
            servers[name] = (start(tmp, name, argv, {}), f"http://127.0.0.1:{port}", True)
        for switch in ["", *switches]:
            port = free_port()
            name = f"planact, {switch}" if switch else "planact"
            work = tmp / (switch or "plain")
            work.mkdir()
            env = {**server_env(work, fake.url), "LOG_LEVEL": "WARNING"}
            argv = [sys.executable, __file__, "--serve", switch, "--", "serve", "--port", str(port)]
            servers[name] = (start(work, name, argv, env), f"http://127.0.0.1:{port}", False)
        for proc, url, relay_api in servers.values():  # warm up
            await capacity(proc, fake.proc, url, 5, relay_api, 1, GOAL, CALLS)
        names = list(servers)
        cpu: dict[str, list[float]] = {name: [] for name in names}
        for n in range(rounds):
            shift = n % len(names)  # each round starts with another server
            for name in names[shift:] + names[:shift]:
                proc, url, relay_api = servers[name]
                got = await capacity(proc, fake.proc, url, level, relay_api, 1, GOAL, CALLS)
                cpu[name].append(got["cpu_ms_per_run"])
            line = ", ".join(f"{name} {values[-1]:.1f}" for name, values in cpu.items())
            print(f"round {n + 1}: CPU ms a run: {line}; load {os.getloadavg()[0]:.1f}", flush=True)
        print(f"{level} concurrent, {rounds} rounds, medians:")
        for name, values in cpu.items():
            ratios = [a / b for a, b in zip(values, cpu["relay"], strict=True)]
            print(
                f"  {name:24} CPU {statistics.median(values):6.1f} ms a run, "
                f"÷ relay {statistics.median(ratios):.2f} ({min(ratios):.2f}-{max(ratios):.2f})"
            )
    finally:
        for proc, _, _ in servers.values():
            proc.stop()
        fake.proc.stop()


def main() -> int:
    if "--serve" in sys.argv:
        at = sys.argv.index("--serve")
        return serve(sys.argv[at + 1], sys.argv[sys.argv.index("--") + 1 :])
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--level", type=int, default=50, help="concurrent runs")
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--switches", default="all", help=f"all, or some of {SWITCHES}")
    args = parser.parse_args()
    switches = list(SWITCHES) if args.switches == "all" else args.switches.split(",")
    for switch in switches:
        if switch not in SWITCHES:
            parser.error(f"unknown switch {switch!r}: one of {', '.join(SWITCHES)}")
    asyncio.run(measure(args.level, args.rounds, switches))
    return 0


if __name__ == "__main__":
    sys.exit(main())
