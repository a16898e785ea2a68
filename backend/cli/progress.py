"""What `planact run` prints: a progress line per stored message, the output of running
commands line by line as it arrives (live deltas), and the run's last line."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from backend.actions.registry import Registry
from backend.agent.narration import NARRATION
from backend.agent.tool_notices import NOTICE
from backend.agent.unusable import UNUSABLE
from backend.cli.words import person_line
from backend.messages.deltas import DeltaEvent
from backend.messages.kinds import RUN_END_KINDS, MessageKind
from backend.messages.message import Message
from backend.messages.payloads import PlanTask, SummaryFile, read_items
from backend.store.shapes import UsageFigures


def final_line(
    run_id: str, status: str, error: str, workspace: Path, spent: UsageFigures | None = None
) -> str:
    """`planact run`'s last line: each way a run ends reads as itself (a stop is not a
    failure, a run waiting for the person is not over), with what the run spent."""
    where = f"files in {workspace}"
    if spent is not None and spent.calls:
        where = f"{spent_words(spent)}; {where}"
    if status == "completed":
        return f"run {run_id} completed; {where}"
    if status == "stopped":
        return f"run {run_id} stopped before it finished; {where}"
    if status == "waiting":
        return f"run {run_id} is waiting for your answer (open it in the web UI); {where}"
    if status == "failed":
        cause = error.strip().split("\n", 1)[0]
        return f"run {run_id} FAILED{': ' + cause if cause else ''}; {where}"
    return f"run {run_id} {status}; {where}"


def spent_words(spent: UsageFigures) -> str:
    """``12,340 tokens in (9,800 cached, 79%), 410 out, $0.0123`` (the cost: "price unknown"
    when litellm does not know the model's)."""
    cached = ""
    if spent.input_tokens:
        share = spent.cached_input_tokens / spent.input_tokens
        cached = f" ({spent.cached_input_tokens:,} cached, {share:.0%})"
    if spent.cost_usd is None:
        price = "price unknown"
    else:
        price = f"${spent.cost_usd:,.4f}" if spent.cost_usd < 1 else f"${spent.cost_usd:,.2f}"
    return f"{spent.input_tokens:,} tokens in{cached}, {spent.output_tokens:,} out, {price}"


BRIEF = 160  # characters of a progress line for routine messages (never for failures)


def progress_line(actions: Registry, msg: Message, output_shown: bool = False) -> str:
    """One progress entry. Failures, errors and stops are printed whole (the cause of an
    error is never cut); routine messages on one line. ``output_shown``: the command's
    output was already printed live, so a successful one shows only its first line."""
    kind = msg.meta.action_type
    text = msg.content.strip()
    if kind == MessageKind.PLAN:
        titles = "; ".join(t.title for t in read_items(msg.meta.json_, PlanTask))
        return f"[plan] {titles}"
    if kind == MessageKind.FINISH_SUMMERY:
        files = ", ".join(f.filepath for f in read_items(msg.meta.json_, SummaryFile))
        return f"[summary] {_indent(text)}\n[files] {files or '(none)'}"
    if kind == MessageKind.THINKING and msg.type == UNUSABLE:  # a reply the agent could not use
        return f"[unusable reply] {_indent(text)}"
    if kind == MessageKind.THINKING and msg.type == NOTICE:  # e.g. an MCP server that is down
        return f"[note] {_indent(text)}"
    if kind == MessageKind.AUTO_REPLY or (kind == MessageKind.THINKING and msg.type == NARRATION):
        return f"[{kind}] {_indent(text)}"  # the model's words to the person: whole
    if (said := person_line(msg)) is not None:  # the goal, approvals, answers: what happened
        return said
    mark = {"running": "…", "success": "ok", "failure": "FAIL"}[msg.status]
    failed = msg.status == "failure"
    if msg.status != "running":  # its card: a command and its output, a diff, a file
        shown = actions.show(kind, text, msg.meta.json_, failed=failed)
        if shown and output_shown and not failed:
            return f"[{kind} {mark}] {shown.split(chr(10), 1)[0]} (output above)"
        if shown:
            return f"[{kind} {mark}] {_indent(shown)}"
    if failed or kind in RUN_END_KINDS:
        return f"[{kind} {mark}] {_indent(text)}"  # whole, even after its live output
    if output_shown:
        text = text.split("\n", 1)[0] + " (output above)"
    line = " ".join(text.split())
    if len(line) > BRIEF:
        line = line[:BRIEF] + "…"
    return f"[{kind} {mark}] {line}"


def _indent(text: str) -> str:
    return text.replace("\n", "\n    ")


class Progress:
    """`planact run` output: stored messages as progress lines, and the output of running
    commands line by line as it is printed (live deltas)."""

    def __init__(self, actions: Registry, write: Callable[[str], None] | None = None) -> None:
        self.actions = actions  # the run's (how its results print)
        self._write = write or (lambda line: print(line, flush=True))
        self._partial: dict[tuple[str, str], str] = {}
        self._shown: set[str] = set()

    def delta(self, delta: DeltaEvent) -> None:
        stream = delta.stream
        if not stream:
            return  # model text: its stored message follows
        uuid = delta.uuid
        key = (uuid, stream)
        text = self._partial.pop(key, "") + delta.text
        *lines, rest = text.split("\n")
        if rest:
            self._partial[key] = rest
        defn = self.actions.by_kind(delta.action_type)
        progress = not (defn is not None and defn.handling.output_is_result)
        for line in lines:
            self._line(uuid, str(stream), line, progress=progress)

    def message(self, msg: Message) -> None:
        if msg.status != "running":
            for key in [k for k in self._partial if k[0] == msg.uuid]:
                self._line(msg.uuid, key[1], self._partial.pop(key))
        shown = False
        if msg.status != "running" and msg.uuid in self._shown:
            self._shown.discard(msg.uuid)
            shown = True
        self._write(progress_line(self.actions, msg, output_shown=shown))

    def _line(self, uuid: str, stream: str, line: str, *, progress: bool = False) -> None:
        if not progress:  # a command's output (a tool's progress is not its result)
            self._shown.add(uuid)
        self._write(f"  {'!' if stream == 'stderr' else '|'} {line}")
