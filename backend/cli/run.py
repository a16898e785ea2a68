"""planact run: one goal headless, in a process of its own (an instance with a lease, the
run executed inline), its progress printed and its waits asked on the terminal; --from goes on
in a fork of a conversation at a checkpoint."""

from __future__ import annotations

import asyncio
import re
import sys
from pathlib import Path
from typing import Any

from backend.cli.files import upload_inputs
from backend.cli.progress import Progress, final_line
from backend.cli.waits import Follower, Terminal, Waits, follow, needs_terminal, to_person
from backend.config import Settings


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

    async def close() -> None:  # everything this process opened, in order
        await manager.shutdown()
        await previews.close()  # (nothing to do when no preview started it)
        await tools.aclose()
        await llm.aclose()
        await store.close()

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
            await close()
            return 2
    if files:  # the inputs go into a new conversation's workspace first
        cid = await upload_inputs(store, manager, settings, files)
        if cid is None:
            await close()
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
    await close()
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
