"""The one place the LemonAI adapter touches planact's services.

Everything the adapter needs from the run manager, the store and the settings goes through
:class:`Services`, so that a change of those internals (the run lifecycle package, the shared
upload service, per-run models) is one edit here and nowhere else in ``backend/lemonai``.
"""

from __future__ import annotations

import os
import re
import secrets
import shutil
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO

from backend.messages.message import Message
from backend.runs.feed import FeedEvent, run_feed
from backend.runtime.paths import PathEscapeError
from backend.store.repo import ConflictError, NotFoundError, RestoringError
from backend.store.shapes import ConversationDetail, ConversationSummary
from backend.uploads import (
    MB,
    UploadError,
    UploadLimits,
    budget_locked,
    check_workspace_room,
    cut_name,
    save_upload,
    upload_path,
    with_budget_lock,
)

if TYPE_CHECKING:
    from backend.config import Settings
    from backend.runs import RunManager
    from backend.store.repo import Store

__all__ = [
    "ConflictError",
    "NotFoundError",
    "PathEscapeError",
    "RestoringError",
    "Services",
    "Staged",
    "UploadError",
]

STAGING_DIR = ".lemonai-uploads"
# LemonAI marks a conversation done as soon as its stop call answers and drops the stream
# after that: answer once the run has published its stop message (or after STOP_WAIT).
STOP_WAIT = 5.0
UPLOAD_DIR = "upload"
# an upload never sent with a message is dropped after this long (LemonAI uploads first)
STAGED_MAX_AGE = 24 * 3600.0
_FILE_ID = re.compile(r"^[0-9a-f]{32}$")


@dataclass
class Staged:
    """A file uploaded before it belongs to a conversation (LemonAI uploads first)."""

    id: str
    name: str
    size: int


class Services:
    def __init__(self, settings: Settings, manager: RunManager, store: Store) -> None:
        self.settings = settings
        self.manager = manager
        self.store = store

    # -- auth ------------------------------------------------------------------------------
    def user_tokens(self) -> dict[str, str]:
        """token -> user id; empty when the server runs without AUTH_TOKEN."""
        return self.settings.user_tokens()

    # -- models ----------------------------------------------------------------------------
    def models(self) -> list[str]:
        """The litellm ids a user may pick (LLM_MODELS), the default (LLM_MODEL) first."""
        names: list[str] = []
        if self.settings.llm_model:
            names.append(self.settings.llm_model)
        extra = getattr(self.settings, "llm_models", None) or ""
        items = extra if isinstance(extra, list | tuple) else str(extra).split(",")
        for item in items:
            name = str(item).strip()
            if name and name not in names:
                names.append(name)
        return names

    # -- conversations ---------------------------------------------------------------------
    async def create_conversation(self, user_id: str, title: str) -> str:
        return await self.store.create_conversation(user_id, title)

    async def get_conversation(self, user_id: str, cid: str) -> ConversationDetail | None:
        return await self.store.get_conversation(user_id, cid)

    async def list_conversations(self, user_id: str) -> list[ConversationSummary]:
        return await self.store.list_conversations(user_id)

    async def rename_conversation(self, user_id: str, cid: str, title: str) -> bool:
        return await self.store.rename_conversation(user_id, cid, title)

    async def delete_conversation(self, user_id: str, cid: str) -> bool:
        return await self.manager.delete_conversation(user_id, cid)

    async def messages(self, cid: str) -> list[Message]:
        return await self.store.messages(cid, limit=1_000_000)

    def workspace(self, user_id: str, cid: str) -> Path:
        return self.manager.workspace(user_id, cid)

    def user_root(self, user_id: str) -> Path:
        """The folder that holds every conversation workspace of one user."""
        return self.workspace(user_id, "x").parent

    # -- runs ------------------------------------------------------------------------------
    async def start_run(
        self, user_id: str, goal: str, cid: str | None, mode: str, model: str | None = None
    ) -> tuple[str, str]:
        """Start a run; raises ConflictError (a run is active) or NotFoundError."""
        # LemonAI's client has no approval card or answer box: its runs never wait for a
        # person (docs/lemonai.md)
        return await self.manager.start(
            user_id,
            goal,
            conversation_id=cid,
            mode=mode,
            model=model,
            approval="never",
            can_ask=False,
        )

    async def active_run(self, user_id: str, cid: str) -> str | None:
        conv = await self.store.get_conversation(user_id, cid)
        if conv is None:
            raise NotFoundError(cid)
        for run in reversed(conv.runs):
            if run.status in ("running", "waiting"):
                return run.run_id
        return None

    async def stop_run(self, run_id: str, wait: float = STOP_WAIT) -> str:
        """Stop the run and wait (bounded) until it has ended; its status then."""
        await self.manager.stop(run_id)
        status = await self.manager.wait(run_id, timeout=wait)  # whichever process owns it
        return status or "running"

    def events(self, cid: str, rid: str) -> AsyncIterator[FeedEvent]:
        """The run's feed (the one /api/agent/runs/{id}/events encodes as SSE)."""
        return run_feed(self.store, self.manager.notifier, cid, rid)

    # -- uploads ---------------------------------------------------------------------------
    # A small stand-in for the shared upload service: LemonAI uploads a file before the
    # conversation exists, so the file is staged per user and moved into the conversation
    # workspace when a run names it in `fileIds`.
    def upload_limit(self) -> int:
        return int(self.settings.upload_max_mb * 1024 * 1024)

    async def stage_uploads(self, user_id: str, files: list[tuple[str, BinaryIO]]) -> list[Staged]:
        """Stage ``(filename, source)`` files, all or none: under the person's staging lock
        (backend/uploads.py, across processes), drop the stale unsent uploads, refuse with
        UploadError(413) when the unsent ones and these would hold more than one workspace
        (WORKSPACE_MAX_MB), then write. UploadError(400) for a name that cannot be used."""
        root = self.user_root(user_id) / STAGING_DIR
        room = int(self.settings.workspace_max_mb * MB)
        named = [(staged_name(filename), source) for filename, source in files]

        def stage() -> list[Staged]:
            held = sweep_staged(root, time.time() - STAGED_MAX_AGE)
            incoming = sum(source.seek(0, os.SEEK_END) for _name, source in named)
            if held + incoming > room:
                raise UploadError(
                    413,
                    f"Uploads not yet sent with a message hold {held / MB:.1f} MB; "
                    f"{incoming / MB:.1f} MB more would pass the limit of {room / MB:g} MB "
                    "(WORKSPACE_MAX_MB). Send them with a message first (unsent uploads are "
                    "dropped after a day).",
                )
            staged: list[Staged] = []
            try:
                for name, source in named:
                    staged.append(_stage_one(root, name, source))
            except BaseException:
                for done in staged:
                    shutil.rmtree(root / done.id, ignore_errors=True)
                raise
            return staged

        return await budget_locked(root, stage)

    async def attach_uploads(self, user_id: str, cid: str, file_ids: list[str]) -> list[str]:
        """Move staged files into the conversation workspace through planact's upload
        service (confined writes, WORKSPACE_MAX_MB, recorded as the person's input files);
        their workspace paths. Raises NotFoundError for an unknown id, UploadError."""
        workspace = self.workspace(user_id, cid)
        root = self.user_root(user_id) / STAGING_DIR
        limits = UploadLimits.from_mb(self.settings.upload_max_mb, self.settings.workspace_max_mb)

        def move_locked() -> list[tuple[str, int]]:
            # staging lock, then the workspace's: the order every upload path takes
            return with_budget_lock(workspace, move)

        def move() -> list[tuple[str, int]]:
            found: list[tuple[Path, str]] = []
            for file_id in file_ids:  # check every id before moving anything
                if not _FILE_ID.match(file_id):
                    raise NotFoundError(file_id)
                folder = root / file_id
                names = sorted(os.listdir(folder)) if folder.is_dir() else []
                if len(names) != 1:
                    raise NotFoundError(file_id)
                found.append((folder, names[0]))
            incoming = {
                f"{UPLOAD_DIR}/{name}": (folder / name).stat().st_size for folder, name in found
            }
            check_workspace_room(workspace, incoming, limits)
            moved: list[tuple[str, int]] = []
            for folder, name in found:
                rel = f"{UPLOAD_DIR}/{name}"
                with open(folder / name, "rb") as source:
                    moved.append((rel, save_upload(workspace, rel, source)))
                shutil.rmtree(folder, ignore_errors=True)
            return moved

        moved = await budget_locked(root, move_locked)
        await self.store.record_uploads(cid, moved)
        return [rel for rel, _size in moved]


def sweep_staged(root: Path, cutoff: float) -> int:
    """Remove the staged uploads under ``root`` last changed before ``cutoff`` (epoch
    seconds); the bytes the others hold."""
    held = 0
    try:
        folders = list(os.scandir(root))
    except FileNotFoundError:
        return 0
    for folder in folders:
        try:
            if not folder.is_dir(follow_symlinks=False):
                continue
            if folder.stat(follow_symlinks=False).st_mtime < cutoff:
                shutil.rmtree(folder.path, ignore_errors=True)
                continue
            for entry in os.scandir(folder.path):
                if entry.is_file(follow_symlinks=False):
                    held += entry.stat(follow_symlinks=False).st_size
        except FileNotFoundError:  # attached or swept meanwhile
            continue
    return held


def staged_name(filename: str) -> str:
    """The name a LemonAI upload is kept under: its last path part, without leading dots,
    cut to 255 bytes of UTF-8 (never inside a character; a short extension kept), or
    "upload.bin" when nothing is left. UploadError(400) for a name planact's own uploads
    refuse (control or format characters)."""
    base = filename.replace("\\", "/").rsplit("/", 1)[-1].strip().lstrip(".")
    return upload_path("", cut_name(base) or "upload.bin")


def _stage_one(root: Path, name: str, source: BinaryIO) -> Staged:
    file_id = secrets.token_hex(16)
    folder = root / file_id
    folder.mkdir(parents=True)
    try:
        source.seek(0)
        with open(folder / name, "xb") as out:
            shutil.copyfileobj(source, out)
            size = out.tell()
    except BaseException:
        shutil.rmtree(folder, ignore_errors=True)  # no folder left by a failed write
        raise
    return Staged(file_id, name, size)
