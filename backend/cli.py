"""planact serve | run."""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from pathlib import Path

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from backend.cli_files import check_input_files, upload_inputs
from backend.config import LOOPBACK_HOSTS, Settings
from backend.logs import configure_logging
from backend.messages.message import Message


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="planact", description="planact agent service")
    sub = parser.add_subparsers(dest="command", required=True)
    serve = sub.add_parser("serve", help="serve the UI and the API")
    serve.add_argument("--host")
    serve.add_argument("--port", type=int)
    run = sub.add_parser("run", help="run one goal headless")
    run.add_argument("goal")
    run.add_argument("--runtime", choices=["local", "docker"])
    run.add_argument("--workspace", type=Path, help="WORKSPACE_DIR for this run")
    run.add_argument("--mode", choices=["auto", "agent", "chat"], default="auto")
    run.add_argument(
        "--file",
        dest="files",
        action="append",
        type=Path,
        default=[],
        metavar="PATH",
        help="an input file copied into the run's workspace (repeatable)",
    )
    worker = sub.add_parser("worker", help="execute queued runs (EXECUTOR=queue, PostgreSQL)")
    worker.add_argument("--concurrency", type=int, help="runs at once (WORKER_CONCURRENCY)")
    args = parser.parse_args(argv)
    # issue 13: library lines (litellm, alembic, httpx) only with LOG_LEVEL=DEBUG; `run`
    # prints progress, so only warnings of ours unless LOG_LEVEL says otherwise
    configure_logging(os.environ.get("LOG_LEVEL"), quiet=args.command == "run")
    if args.command == "serve":
        return serve_cmd(args.host, args.port)
    if args.command == "worker":
        return worker_cmd(args.concurrency)
    if args.files:
        problem = check_input_files(args.files)
        if problem:
            print(f"planact: {problem}", file=sys.stderr)
            return 2
    return asyncio.run(run_cmd(args.goal, args.runtime, args.workspace, args.mode, args.files))


def serve_cmd(host: str | None, port: int | None) -> int:
    settings = Settings()
    if host:
        settings.host = host
    if port:
        settings.port = port
    if settings.host not in LOOPBACK_HOSTS and not settings.auth_enabled:
        print(
            f"planact: refusing to listen on {settings.host} without AUTH_TOKEN: anyone who "
            "can reach the port could run commands. Set AUTH_TOKEN (or bind 127.0.0.1).",
            file=sys.stderr,
        )
        return 2
    from backend.app import create_app
    from backend.runs.executor import QueueConfigError

    try:
        app = create_app(settings)
    except QueueConfigError as exc:
        print(f"planact: {exc}", file=sys.stderr)
        return 2
    from backend.serve import serve

    serve(app, settings)
    return 0


def worker_cmd(concurrency: int | None) -> int:
    from backend.runs.executor import QueueConfigError
    from backend.runs.worker import run_worker

    try:
        return asyncio.run(run_worker(Settings(), concurrency))
    except QueueConfigError as exc:
        print(f"planact worker: {exc}", file=sys.stderr)
        return 2


async def run_cmd(
    goal: str,
    runtime: str | None,
    workspace: Path | None,
    mode: str,
    files: list[Path] | None = None,
) -> int:
    settings = Settings()
    if workspace is not None:
        settings.workspace_dir = workspace
    from backend.agent.routing import load_specialists
    from backend.app import make_llm
    from backend.runs import RunManager
    from backend.runs.lease import new_instance_id
    from backend.runs.notify import make_notifier
    from backend.runs.worker import prewarm
    from backend.store.repo import Store

    llm = make_llm(settings)
    await prewarm(llm)
    store = Store(settings.database_url)
    store.migrate()
    # an instance of its own with a lease: a live server's runs on the same database are
    # left alone; the run executes here (inline) whatever EXECUTOR says
    iid = new_instance_id("cli")
    manager = RunManager(
        settings,
        store,
        make_notifier(settings.database_url, iid),
        llm,
        load_specialists(settings.specialists_file),
        kind="cli",
        instance_id=iid,
    )
    await manager.open()

    def show(msg: Message) -> None:
        print(_progress_line(msg), flush=True)

    cid: str | None = None
    if files:  # issue 13: the inputs go into a new conversation's workspace first
        cid = await upload_inputs(store, manager, settings, files)
        if cid is None:
            await manager.shutdown()
            await llm.aclose()
            await store.close()
            return 2
    cid, rid = await manager.start(
        "1", goal, conversation_id=cid, mode=mode, runtime=runtime, listener=show
    )
    try:
        status = await manager.wait(rid)
    except (KeyboardInterrupt, asyncio.CancelledError):  # Ctrl-C: stop the run, cleanly
        await manager.stop(rid)
        status = await manager.wait(rid, timeout=30)
    run = await store.get_run(rid)
    status = run["status"] if run else status
    ws = manager.workspace("1", cid)
    print(f"run {rid} {status}; files in {ws}", flush=True)
    await manager.shutdown()
    await llm.aclose()
    await store.close()
    return 0 if status == "completed" else 1


def _progress_line(msg: Message) -> str:
    kind = msg.meta.action_type
    if msg.status == "failure" and kind not in ("task", "finish_summery"):
        # the cause of an error is never cut (issue 13): every line, indented
        head, _, rest = msg.content.strip().partition("\n")
        body = "".join(f"\n    {line}" for line in rest.splitlines())
        return f"[{kind} FAIL] {head}{body}"
    text = " ".join(msg.content.split())
    if len(text) > 160:
        text = text[:160] + "…"
    if kind == "plan":
        titles = "; ".join(t.get("title", "") for t in msg.meta.json_)
        return f"[plan] {titles}"
    if kind == "finish_summery":
        files = ", ".join(f.get("filepath", "") for f in msg.meta.json_)
        return f"[summary] {text}\n[files] {files or '(none)'}"
    mark = {"running": "…", "success": "ok", "failure": "FAIL"}[msg.status]
    return f"[{kind} {mark}] {text}"


if __name__ == "__main__":
    sys.exit(main())
