"""Previews end to end: an app started by a scripted run, its preview message, the processes it
left."""

from __future__ import annotations

import datetime
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from backend.store.repo import Store
from backend.store.rows import StoredPreview
from tests.agent.scripts import finish, plan_reply, write
from tests.e2e.server import Server, server_env
from tests.fakellm import FakeModelServer
from tests.support.ports import free_port
from tests.support.runtime import require_bwrap, require_docker

# the runtimes previews are tested in
RUNTIMES = [
    pytest.param("local-bwrap", marks=pytest.mark.bwrap),
    pytest.param("docker", marks=pytest.mark.docker),
]


def processes_with(marker: str) -> list[int]:
    """Pids of the processes whose command line holds ``marker`` (any user, any sandbox)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as fh:
                if marker.encode() in fh.read():
                    found.append(int(entry))
        except OSError:
            continue
    return found


def preview_message(messages: list[dict[str, Any]]) -> dict[str, Any]:
    found = [
        m
        for m in messages
        if m["meta"]["action_type"] == "preview" and m["status"] in ("success", "failure")
    ]
    assert found, [m["meta"]["action_type"] for m in messages]
    return found[-1]


def start_app(
    ps: PreviewServer, fake_model: FakeModelServer, marker: str, before: str = ""
) -> tuple[str, str]:
    """Run a goal whose model writes and previews the app; (conversation id, preview URL).
    ``before``: shell text the service runs first."""
    app_script(
        fake_model,
        write_app() + preview_tag(8080, f"{before}python3 app.py 8080 {marker}", name="app"),
        done(),
    )
    messages, end, headers = ps.server.run({"goal": "Build me an app and show it"})
    assert end["status"] == "completed", messages[-3:]
    msg = preview_message(messages)
    assert msg["status"] == "success", msg["content"]
    entry = msg["meta"]["json"][0]
    assert entry["name"] == "app" and entry["port"] == 8080 and entry["path"] == "/"
    assert entry["url"].startswith(ps.preview_base + "/p/")
    assert entry["url"] in msg["content"]
    # the summary lists the running preview (after the files, an entry without a filepath)
    [summary] = [m for m in messages if m["meta"]["action_type"] == "finish_summery"]
    assert {"preview": entry} in summary["meta"]["json"]
    assert f"- app: {entry['url']}" in summary["content"]
    assert any(f.get("filepath") == "app.py" for f in summary["meta"]["json"])
    return headers["x-conversation-id"], entry["url"]


APP = (Path(__file__).parents[1] / "previews" / "sample_app.py").read_text()


def preview_tag(port: int, command: str = "", **extra: str) -> str:
    parts = [f"<port>{port}</port>"]
    if command:
        parts.append(f"<command>{command}</command>")
    parts += [f"<{k}>{v}</{k}>" for k, v in extra.items()]
    return f"<preview>{''.join(parts)}</preview>"


def app_script(model: FakeModelServer, *thinking: str, summary: str = "Previewed the app.") -> None:
    """The scripted model: a plan, the given thinking replies (the last one finishes)."""
    steps: list[dict[str, object]] = [
        {"stage": "route", "content": '{"task_type": "code_generation", "needs_tools": true}'},
        {"stage": "planning", "content": plan_reply("Build and preview the app")},
    ]
    steps += [{"stage": "thinking", "content": t} for t in thinking]
    steps.append({"stage": "summary", "content": summary})
    model.script(*steps)


def write_app() -> str:
    return write("app.py", APP)


def done(message: str = "previewed") -> str:
    return finish(message)


@dataclass
class PreviewServer:
    server: Server
    preview_port: int
    runtime: str

    @property
    def preview_base(self) -> str:
        return f"http://127.0.0.1:{self.preview_port}"


def runtime_env(runtime: str) -> dict[str, str]:
    if runtime == "docker":
        require_docker()
        return {
            "RUNTIME": "docker",
            "SANDBOX_IMAGE": os.environ.get("SANDBOX_IMAGE", "planact-sandbox:latest"),
        }
    require_bwrap()
    return {"RUNTIME": "local", "LOCAL_SANDBOX": "bwrap"}


def start_preview_server(
    runtime: str, tmp_path: Path, fake_model: FakeModelServer, **extra: str
) -> Iterator[PreviewServer]:
    preview_port = free_port()
    env = server_env(
        tmp_path,
        fake_model.base_url,
        PREVIEW_URL=f"http://127.0.0.1:{preview_port}",
        PREVIEW_SOCKET_DIR=str(tmp_path / "pv"),
        PREVIEW_START_TIMEOUT="30",
        **runtime_env(runtime),
        **extra,
    )
    server = Server(tmp_path, env).start()
    try:
        yield PreviewServer(server, preview_port, runtime)
    finally:
        server.stop()


async def seed_ready_service(
    store: Store, *, port: int, socket: str, token: str, owner: str, title: str
) -> StoredPreview:
    """A ready service preview of user ``u``'s new conversation, its forwarder at ``socket``
    (what the host stores once a service listens), for the origin to forward to. ``owner``
    gets a live lease (a dead owner's services read stopped)."""
    await store.renew_instance(owner, "serve", 3600.0, "test")
    cid = await store.create_conversation("u", title)
    return await store.put_preview(
        {
            "conversation_id": cid,
            "user_id": "u",
            "kind": "service",
            "name": "app",
            "port": port,
            "path": "/",
            "state": "ready",
            "owner": owner,
            "socket": socket,
            "token": token,
            "token_expires": datetime.datetime(2100, 1, 1),
        }
    )
