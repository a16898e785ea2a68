"""planact serve | worker | run: the command line, and the serve and worker commands
(`planact run` is backend/cli/run.py, what it prints backend/cli/progress.py)."""

from __future__ import annotations

import argparse
import asyncio
import errno
import logging
import os
import socket
import sys
from pathlib import Path

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from backend.cli.files import check_input_files
from backend.cli.run import parse_from, run_cmd
from backend.config import LOOPBACK_HOSTS, Settings
from backend.logs import configure_logging
from backend.runtime.registry import from_environment as runtimes_here
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


if __name__ == "__main__":
    sys.exit(main())
