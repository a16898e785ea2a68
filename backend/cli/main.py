"""planact serve | run."""

from __future__ import annotations

import argparse
import asyncio
import errno
import logging
import os
import re
import socket
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from backend.actions.registry import Registry
from backend.agent.narration import NARRATION
from backend.agent.tool_notices import NOTICE
from backend.agent.unusable import UNUSABLE
from backend.cli.files import check_input_files, upload_inputs
from backend.cli.waits import Follower, Terminal, Waits, follow, needs_terminal, to_person
from backend.cli.words import person_line
from backend.config import LOOPBACK_HOSTS, Settings
from backend.logs import configure_logging
from backend.messages.deltas import DeltaEvent
from backend.messages.kinds import RUN_END_KINDS, MessageKind
from backend.messages.message import Message
from backend.messages.payloads import PlanTask, SummaryFile, read_items
from backend.runtime.registry import from_environment as runtimes_here
from backend.store.shapes import UsageFigures
from backend.waits import APPROVAL_MODES

log = logging.getLogger("planact")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="planact", description="planact agent service")
    sub = parser.add_subparsers(dest="command", required=True)
    serve = sub.add_parser("serve", help="serve the UI and the API")
    serve.add_argument("--host", help="address to listen on (HOST, default 127.0.0.1)")
    serve.add_argument("--port", type=int, help="port to listen on (PORT, default 8000)")
    run = sub.add_parser("run", help="run one goal headless")
    run.add_argument("goal", help="what the agent should do, in plain words")
    run.add_argument(
        "--runtime",
        choices=runtimes_here().names(),
        help="where commands run (RUNTIME; default from the settings)",
    )
    run.add_argument("--workspace", type=Path, help="WORKSPACE_DIR for this run")
    run.add_argument(
        "--mode",
        choices=["auto", "agent", "chat"],
        default="auto",
        help="agent: plan and act; chat: answer only; auto (default): the model decides",
    )
    run.add_argument(
        "--model",
        metavar="MODEL",
        help="the model of this run: LLM_MODEL or one of LLM_MODELS (default LLM_MODEL)",
    )
    run.add_argument(
        "--file",
        dest="files",
        action="append",
        type=Path,
        default=[],
        metavar="PATH",
        help="an input file copied into the run's workspace (repeatable)",
    )
    run.add_argument(
        "--approval",
        choices=APPROVAL_MODES,
        help="which actions wait for your y/n on the terminal before they run: never; "
        "risky (commands, web and MCP tools); always (also file edits). Default: "
        "APPROVAL_MODE (never). Needs a terminal unless never",
    )
    run.add_argument(
        "--from",
        dest="from_",
        metavar="CONVERSATION[@SEQ]",
        help="go on from a checkpoint: the goal runs in a fork of CONVERSATION at its "
        "checkpoint SEQ (default: its last), the original untouched",
    )
    worker = sub.add_parser("worker", help="execute queued runs (EXECUTOR=queue, PostgreSQL)")
    worker.add_argument("--concurrency", type=int, help="runs at once (WORKER_CONCURRENCY)")
    args = parser.parse_args(argv)
    # library lines (litellm, alembic, httpx) only with LOG_LEVEL=DEBUG; `run`
    # prints progress, so only warnings of ours unless LOG_LEVEL says otherwise
    configure_logging(os.environ.get("LOG_LEVEL"), quiet=args.command == "run")
    if args.command == "serve":
        return serve_cmd(args.host, args.port)
    if args.command == "worker":
        return worker_cmd(args.concurrency)
    if args.from_ and args.files:
        print("planact: --from and --file cannot be combined.", file=sys.stderr)
        return 2
    if args.from_ and parse_from(args.from_) is None:
        print(
            f"planact: --from {args.from_}: give CONVERSATION or CONVERSATION@SEQ.",
            file=sys.stderr,
        )
        return 2
    if args.files:
        problem = check_input_files(args.files)
        if problem:
            print(f"planact: {problem}", file=sys.stderr)
            return 2
    from backend.runtime.sandboxing import SandboxConfigError

    try:
        return asyncio.run(
            run_cmd(
                args.goal,
                args.runtime,
                args.workspace,
                args.mode,
                args.files,
                args.model,
                args.approval,
                args.from_,
            )
        )
    except SandboxConfigError as exc:
        print(f"planact: {exc}", file=sys.stderr)
        return 2


def parse_from(text: str) -> tuple[str, int | None] | None:
    """CONVERSATION[@SEQ] as (conversation id, seq or None); None when malformed."""
    cid, _, seq = text.partition("@")
    if not re.fullmatch(r"[A-Za-z0-9_-]{1,64}", cid):
        return None
    if not seq:
        return cid, None
    return (cid, int(seq)) if seq.isdigit() and len(seq) <= 10 else None


async def fork_from(manager: Any, store: Any, text: str) -> tuple[str | None, str]:
    """The fork of ``CONVERSATION[@SEQ]`` a `planact run --from` goes on in: (its id,
    "") or (None, why not)."""
    from backend.checkpoints import CheckpointNotFound

    parsed = parse_from(text)
    assert parsed is not None
    src, seq = parsed
    conv = await store.get_conversation("1", src)
    if conv is None:
        return None, f"--from {text}: no conversation {src}."
    if seq is None:
        last = await store.last_checkpoint(src)
        if last is None:
            return None, f"--from {text}: the conversation has no checkpoint yet."
        seq = last.seq
    try:
        new = await manager.checkpoints.fork(
            "1",
            manager.checkpoint_repo("1", src),
            src,
            seq,
            conv.title,
            lambda cid: manager.workspace("1", cid),
        )
    except CheckpointNotFound:
        return None, f"--from {text}: no checkpoint at seq {seq}."
    return new, ""


def model_problem(settings: Settings, model: str | None) -> str | None:
    """Why `planact run` cannot start with this model (None: it can)."""
    if model is None:
        return None if settings.llm_model else NO_MODEL_CLI
    choices = settings.model_choices()
    if model not in choices:
        offered = ", ".join(choices) or "none (LLM_MODEL is not set)"
        return f"--model {model} is not offered; the offered models: {offered}."
    return None


NO_MODEL_CLI = (
    "no model is set. Put LLM_MODEL (a litellm model id such as openai/gpt-4o-mini) and "
    "LLM_API_KEY in .env or the environment, then run the command again."
)


def warn_if_no_model(settings: Settings) -> None:
    if not settings.llm_model:
        log.warning(
            "No model is set: runs will fail until LLM_MODEL (a litellm model id such as "
            "openai/gpt-4o-mini) and LLM_API_KEY are put in .env (then restart)."
        )


def port_in_use(host: str, port: int) -> bool:
    """The address is taken by another program (bound as uvicorn binds it)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    try:
        socket.create_server((host, port), family=family).close()
    except OSError as exc:
        return exc.errno == errno.EADDRINUSE
    return False


def serve_cmd(host: str | None, port: int | None) -> int:
    settings = Settings()
    if host:
        settings.host = host
    if port:
        settings.port = port
    if settings.preview_listen is None:  # previews: the preview origin beside the API
        settings.preview_listen = True
    if port_in_use(settings.host, settings.port):
        print(
            f"planact: port {settings.port} on {settings.host} is already in use: stop the "
            "other program or choose --port.",
            file=sys.stderr,
        )
        return 2
    warn_if_no_model(settings)
    if settings.host not in LOOPBACK_HOSTS and not settings.auth_enabled:
        print(
            f"planact: refusing to listen on {settings.host} without AUTH_TOKEN: anyone who "
            "can reach the port could run commands. Set AUTH_TOKEN (or bind 127.0.0.1).",
            file=sys.stderr,
        )
        return 2
    from backend.store.reach import unreachable

    if (why := unreachable(settings.database_url)) is not None:
        print(f"planact: {why}", file=sys.stderr)
        return 2
    from backend.app import create_app
    from backend.previews.links import PreviewConfigError
    from backend.runs.executor import QueueConfigError
    from backend.runtime.sandboxing import SandboxConfigError
    from backend.tools.mcp import McpConfigError

    try:
        app = create_app(settings)
    except (QueueConfigError, McpConfigError, SandboxConfigError, PreviewConfigError) as exc:
        print(f"planact: {exc}", file=sys.stderr)
        return 2
    from backend.serve import serve

    serve(app, settings)
    return 0


def worker_cmd(concurrency: int | None) -> int:
    from backend.runs.executor import QueueConfigError
    from backend.runs.worker import run_worker
    from backend.runtime.sandboxing import SandboxConfigError
    from backend.store.reach import unreachable
    from backend.tools.mcp import McpConfigError

    settings = Settings()
    warn_if_no_model(settings)
    if (why := unreachable(settings.database_url)) is not None:
        print(f"planact worker: {why}", file=sys.stderr)
        return 2
    try:
        return asyncio.run(run_worker(settings, concurrency))
    except (QueueConfigError, McpConfigError, SandboxConfigError) as exc:
        print(f"planact worker: {exc}", file=sys.stderr)
        return 2


async def run_cmd(
    goal: str,
    runtime: str | None,
    workspace: Path | None,
    mode: str,
    files: list[Path] | None = None,
    model: str | None = None,
    approval: str | None = None,
    from_: str | None = None,
) -> int:
    settings = Settings()
    if workspace is not None:
        settings.workspace_dir = workspace
    problem = model_problem(settings, model)
    if problem:
        print(f"planact: {problem}", file=sys.stderr)
        return 2
    source = f"--approval {approval}" if approval else f"APPROVAL_MODE={settings.approval_mode}"
    approval = approval or settings.approval_mode
    refusal = needs_terminal(approval, source)
    if refusal:  # it would have to ask and could not: refused before anything starts
        print(refusal, file=sys.stderr)
        return 2
    # a terminal: approvals and the model's questions are asked on it (else never asked)
    terminal = Terminal(sys.stdin.fileno()) if sys.stdin.isatty() else None
    from backend.llm.factory import make_llm
    from backend.runs import RunManager
    from backend.runs.worker import prewarm
    from backend.store.repo import Store
    from backend.tools.kit import Tools
    from backend.tools.mcp import McpConfigError

    try:
        tools = Tools.from_settings(settings)
    except McpConfigError as exc:
        print(f"planact: {exc}", file=sys.stderr)
        return 2
    from backend.observe.tracing import flush_tracing, setup_tracing

    setup_tracing()  # metrics and traces: only with an OTLP endpoint set
    llm = make_llm(settings)
    await prewarm(llm)
    store = Store(settings.database_url)
    store.migrate()
    # an instance of its own with a lease: a live server's runs on the same database are
    # left alone; the run executes here (inline) whatever EXECUTOR says
    manager = RunManager.for_process(settings, store, llm, kind="cli", tools=tools)
    await manager.open()
    from backend.previews.listener import PreviewListener

    # the preview origin of this run's services, started with the first one
    previews = PreviewListener(settings, store)
    if settings.preview_listen is not False and manager.tools.previews is not None:
        manager.tools.previews.on_start = previews.start

    progress = Progress(manager.actions)
    follower = Follower(store, progress.message)
    waits = None
    if terminal is not None:
        waits = follower.waits = Waits(terminal, manager, to_person, follower.catch_up)

    cid: str | None = None
    if from_:  # a fork of the conversation at its checkpoint
        cid, why = await fork_from(manager, store, from_)
        if cid is None:
            print(f"planact: {why}", file=sys.stderr)
            await manager.shutdown()
            await tools.aclose()
            await llm.aclose()
            await store.close()
            return 2
    if files:  # the inputs go into a new conversation's workspace first
        cid = await upload_inputs(store, manager, settings, files)
        if cid is None:
            await manager.shutdown()
            await tools.aclose()
            await llm.aclose()
            await store.close()
            return 2
    cid, rid = await manager.start(
        "1",
        goal,
        conversation_id=cid,
        mode=mode,
        runtime=runtime,
        listener=follower.message,
        delta_listener=progress.delta,
        model=model,
        approval=approval,
        can_ask=terminal is not None,
    )
    try:
        status = await follow(manager, rid, waits)
    except (KeyboardInterrupt, asyncio.CancelledError):  # Ctrl-C: stop the run, cleanly
        if (task := asyncio.current_task()) is not None:
            task.uncancel()
        await manager.stop(rid)
        status = await manager.wait(rid, timeout=30)
    await follower.catch_up(cid, rid)  # what was stored by another hand (a stop while parked)
    run = await store.get_run(rid)
    status = run.status if run else status
    ws = manager.workspace("1", cid)
    spent = (await store.run_usage(rid)).total
    error = (run.error if run else None) or ""
    print(final_line(rid, str(status), error, ws, spent), flush=True)
    await keep_previews(manager, cid)
    await manager.shutdown()
    await previews.close()
    await tools.aclose()
    await llm.aclose()
    await store.close()
    flush_tracing()
    return 0 if status == "completed" else 1


async def keep_previews(manager: Any, cid: str) -> None:
    """The run's previews keep running until the person ends them (Ctrl-C), or until they
    stop by themselves (idle, maximum age, exit)."""
    host = manager.tools.previews
    if host is None or not host.services:
        return
    rows = [r for r in await host.rows(cid) if r.state == "ready"]
    for row in rows:
        print(f"preview {row.name}: {host.url(row)}", flush=True)
    print("Previews keep running: press Ctrl-C to stop them.", flush=True)
    try:
        await host.wait_all()
    except (KeyboardInterrupt, asyncio.CancelledError):
        if (task := asyncio.current_task()) is not None:
            task.uncancel()
        await host.close("planact run was ended")  # stopped here: the lines below are true
    for row in await host.rows(cid):
        why = next((line for line in reversed(host.log_of(row)) if line.startswith("Stopped:")), "")
        print(f"preview {row.name} {why.lower() or 'stopped.'}", flush=True)


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


def _progress_line(actions: Registry, msg: Message, output_shown: bool = False) -> str:
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
        self._write(_progress_line(self.actions, msg, output_shown=shown))

    def _line(self, uuid: str, stream: str, line: str, *, progress: bool = False) -> None:
        if not progress:  # a command's output (a tool's progress is not its result)
            self._shown.add(uuid)
        self._write(f"  {'!' if stream == 'stderr' else '|'} {line}")


if __name__ == "__main__":
    sys.exit(main())
