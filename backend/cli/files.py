"""`planact run --file PATH`: input files copied into a new conversation's workspace."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import anyio

from backend.uploads import UploadError, UploadLimits, check_workspace_room, save_upload

if TYPE_CHECKING:
    from backend.config import Settings
    from backend.runs import RunManager
    from backend.store.repo import Store


def check_input_files(files: list[Path]) -> str:
    """A sentence saying what is wrong with the --file arguments, or ""."""
    names: dict[str, Path] = {}
    for path in files:
        if not path.is_file():
            return f"--file {path}: no such file" + (" (a folder)" if path.is_dir() else "")
        if path.name in names:
            return f"--file {path}: another --file ({names[path.name]}) has the same name"
        names[path.name] = path
    return ""


async def upload_inputs(
    store: Store, manager: RunManager, settings: Settings, files: list[Path]
) -> str | None:
    """Create the conversation and copy the files into its workspace; None (after printing
    why) when a limit refuses them."""
    limits = UploadLimits.from_mb(settings.upload_max_mb, settings.workspace_max_mb)
    sizes = {p.name: p.stat().st_size for p in files}
    big = [n for n, size in sizes.items() if size > limits.upload_max_bytes]
    if big:
        print(
            f"planact: {big[0]} is larger than UPLOAD_MAX_MB ({settings.upload_max_mb:g} MB)",
            flush=True,
        )
        return None
    cid = await store.create_conversation("1", "")
    workspace = manager.workspace("1", cid)
    try:
        await anyio.to_thread.run_sync(check_workspace_room, workspace, sizes, limits)
        written = []
        for path in files:
            with path.open("rb") as src:
                size = await anyio.to_thread.run_sync(save_upload, workspace, path.name, src)
            written.append((path.name, size))
    except UploadError as exc:
        print(f"planact: {exc.message}", flush=True)
        await store.delete_conversation("1", cid)
        return None
    await store.record_uploads(cid, written)
    print(f"[files given] {', '.join(n for n, _ in written)}", flush=True)
    return cid
