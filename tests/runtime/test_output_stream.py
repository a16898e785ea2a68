"""Command output streams while the command runs (live deltas), on every runtime; the
result still holds the whole output."""

from __future__ import annotations

import asyncio
from pathlib import Path

from backend.actions.model import Action
from backend.actions.registry import run_action
from tests.support.runtime import RuntimeFactory

# prints, then waits (bounded) for a file that the output callback creates on "first"
WAIT_FOR_GO = (
    "echo first; printf 'warn\\n\\nlast\\n' >&2; "
    "for i in $(seq 400); do [ -f go ] && break; sleep 0.05; done; echo second"
)


async def test_output_reaches_the_callback_before_the_command_ends(
    make_rt: RuntimeFactory, workspace: Path
) -> None:
    runtime = make_rt()
    seen: dict[str, bytearray] = {"stdout": bytearray(), "stderr": bytearray()}
    released = asyncio.Event()

    def on_output(stream: str, data: bytes) -> None:
        seen[stream] += data
        if b"first" in seen["stdout"] and not released.is_set():
            (workspace / "go").write_text("")  # the command was still waiting for this
            released.set()

    result = await asyncio.wait_for(
        run_action(runtime, Action("terminal_run", {"command": WAIT_FOR_GO}), workspace, on_output),
        60,
    )
    assert released.is_set()
    assert result.ok, result.content
    assert bytes(seen["stdout"]) == b"first\nsecond\n"
    assert bytes(seen["stderr"]) == b"warn\n\nlast\n"
    assert "first\nsecond" in result.content and "warn\n\nlast" in result.content


async def test_without_a_callback_nothing_changes(make_rt: RuntimeFactory, workspace: Path) -> None:
    result = await run_action(
        make_rt(), Action("terminal_run", {"command": "echo one; echo two >&2"}), workspace
    )
    assert result.ok and "one" in result.content and "two" in result.content
