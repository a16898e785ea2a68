"""Runtimes defined outside backend/, as a deployment adds them (``RUNTIME_MODULES``, by
import path): the registry of the settings that name them has them, no other does."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import ClassVar

from backend.runtime.base import BaseRuntime, CommandOutput, OutputCallback, PromptNote, hand_output

PLANNING_NOTE = "inside the tiny test runtime"
THINKING_NOTE = "the tiny test runtime; commands are only echoed"
TINY = "tests.support.plugin_runtimes:TinyRuntime"
PROBED = "tests.support.plugin_runtimes:ProbedRuntime"


class TinyRuntime(BaseRuntime):
    """Runs nothing: answers every command with a line naming itself."""

    name = "tiny"
    prompt_note = PromptNote(planning=PLANNING_NOTE, thinking=THINKING_NOTE)

    async def _run_command(
        self, command: str, workspace: Path, cwd: str, on_output: OutputCallback | None = None
    ) -> CommandOutput:
        out = f"tiny ran {command!r} in {cwd}\n".encode()
        hand_output(on_output, "stdout", out)
        return CommandOutput(exit_code=0, stdout=out, stderr=b"")


class ProbedRuntime(TinyRuntime):
    """Needs something outside the server: offered only once the probe says so."""

    name = "probed"
    always_available = False
    unavailable_note = "the probed thing is switched off"
    answer: ClassVar[bool] = True
    asked: ClassVar[threading.Event] = threading.Event()

    async def available(self) -> bool:
        ProbedRuntime.asked.set()
        return self.answer


class Impostor(TinyRuntime):
    """Takes a builtin runtime's name."""

    name = "local"


NOT_A_RUNTIME = "tests.support.plugin_runtimes:PLANNING_NOTE"
