"""A preview host over a real store and sandbox, without a server: the preview action run
as the task loop runs it (tests/previews)."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from backend.actions.model import Action
from backend.actions.registry import ActionContext, Done, builtin_registry
from backend.config import Settings
from backend.previews.host import PreviewHost
from backend.runtime.local import LocalRuntime
from backend.store.repo import Store
from backend.store.rows import StoredPreview
from backend.tools.kit import Tools
from backend.workspace import workspace_path
from tests.support.runtime import require_bwrap
from tests.support.settings import make_settings


@dataclass
class Bench:
    settings: Settings
    store: Store
    host: PreviewHost
    ctx: ActionContext
    cid: str

    async def preview(self, **params: str) -> Done:
        return await builtin_registry().execute(self.ctx, Action("preview", params))

    async def rows(self) -> list[StoredPreview]:
        return await self.host.rows(self.cid)

    async def conversation(self) -> ActionContext:
        """The same person's new conversation, its workspace not made yet (as before its
        first action)."""
        cid = await self.store.create_conversation("u1", "another")
        workspace = workspace_path(Path(self.settings.workspace_dir).resolve(), "u1", cid)
        return ActionContext(self.ctx.runtime, workspace, tools=self.ctx.tools)


async def make_bench(
    tmp_path: Path, runtime: LocalRuntime | None = None, **overrides: Any
) -> Bench:
    sandbox = require_bwrap()
    values: dict[str, Any] = {"preview_socket_dir": tmp_path / "pv", "preview_start_timeout": 20}
    settings = make_settings(tmp_path, **{**values, **overrides})
    store = Store(settings.database_url)
    await asyncio.to_thread(store.migrate)
    cid = await store.create_conversation("u1", "previews")
    workspace = workspace_path(Path(settings.workspace_dir).resolve(), "u1", cid)
    workspace.mkdir(parents=True)
    await store.renew_instance("instance-1", "serve", 3600.0, "test")  # a live owner
    host = PreviewHost(settings, store, "instance-1")
    runtime = runtime or LocalRuntime(sandbox=sandbox)
    ctx = ActionContext(runtime, workspace, tools=Tools(previews=host))
    return Bench(settings, store, host, ctx, cid)
