"""Checkpoints of the conversations' workspaces: taken, listed, compared, restored (rewind),
copied (fork) and shared, with their index in the store (backend/store/checkpoints.py).

The seam the rest of planact sees is :class:`Checkpoints` (one per process, on the
RunManager); every git call runs on a worker thread, one at a time per conversation here
(a conversation's run is executed by one process at a time).
"""

from __future__ import annotations

import asyncio
import contextlib
import difflib
import itertools
import json
import logging
import secrets
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, TypeVar

import anyio

from backend.checkpoints.gitrepo import REF_PREFIX, SHARE_PREFIX, Change, GitError, GitRepo
from backend.observe.metrics import CHECKPOINT_BYTES, CHECKPOINT_SECONDS, CHECKPOINTS
from backend.store.base import ConflictError, new_id
from backend.store.checkpoints import StoredCheckpoint, StoredShare
from backend.store.repo import Store
from backend.store.tables import utcnow

log = logging.getLogger(__name__)

T = TypeVar("T")
END_OF_RUN = "end of run"
MB = 1024 * 1024
DIFF_MAX_BYTES = 512 * 1024
STREAM_CHUNK = 64 * 1024  # a text file larger than this is listed without its diff
FileKind = Literal["text", "binary", "link"]


class CheckpointNotFound(Exception):
    """No such checkpoint (or share) of the conversation."""


@dataclass(frozen=True)
class FileDiff:
    path: str
    change: str
    kind: FileKind
    diff: str | None = None


@dataclass(frozen=True)
class SharedFile:
    path: str
    size: int
    link: bool


class Checkpoints:
    """Every conversation's checkpoints, for one process."""

    def __init__(self, root: Path, store: Store, max_mb: float) -> None:
        self.root = root
        self.store = store
        self.max_bytes = int(max_mb * MB)
        self._locks: dict[str, asyncio.Lock] = {}

    # -- where --------------------------------------------------------------------------------
    def repo(self, user_id: str, cid: str, workspace: Path) -> GitRepo:
        return GitRepo(self.root / f"user_{user_id}" / f"{cid}.git", workspace)

    def _lock(self, cid: str) -> asyncio.Lock:
        lock = self._locks.get(cid)
        if lock is None:
            lock = self._locks[cid] = asyncio.Lock()
        return lock

    async def _off_loop(self, cid: str, work: Callable[[], T]) -> T:
        async with self._lock(cid):
            return await anyio.to_thread.run_sync(work)

    # -- taking -------------------------------------------------------------------------------
    async def take(
        self,
        repo: GitRepo,
        cid: str,
        run_id: str,
        seq: int,
        label: str,
        *,
        always: bool = False,
    ) -> StoredCheckpoint | None:
        """Checkpoint the workspace after the message ``seq``; None when nothing changed
        since the last checkpoint (unless ``always``: the end of a run)."""
        started = time.perf_counter()
        prev = await self.store.last_checkpoint(cid)
        if prev is not None and prev.seq >= seq:
            return None  # (a resumed run's step taken again)

        def work() -> tuple[str, list[Change], int] | None:
            snap = repo.snapshot()
            if prev is None:
                changes = repo.changes(None, snap.commit)
            else:
                changes, trees = repo.diff(prev.commit, snap.commit)
            if not changes and not always:
                return None
            repo.keep(f"{REF_PREFIX}{seq}", snap.commit)
            if prev is None:
                size = repo.disk_usage(snap.commit)
            else:  # the objects it added: changed files, their folders, the commit
                added = [c.new_sha for c in changes if c.change != "removed"]
                size = repo.loose_bytes([*added, *trees, snap.tree, snap.commit])
            return snap.commit, changes, size

        try:
            done = await self._off_loop(cid, work)
        except (GitError, OSError) as exc:
            CHECKPOINTS.labels("failed").inc()
            log.warning("checkpoint of conversation %s at seq %s failed: %s", cid, seq, exc)
            return None
        if done is None:
            CHECKPOINTS.labels("unchanged").inc()
            return None
        commit, changes, size = done
        cp = StoredCheckpoint(
            conversation_id=cid,
            seq=seq,
            run_id=run_id,
            label=label[:200],
            files_changed=len(changes),
            commit=commit,
            bytes=size,
            created_at=utcnow(),
        )
        await self.store.add_checkpoint(cp)
        CHECKPOINTS.labels("taken").inc()
        CHECKPOINT_BYTES.inc(size)
        CHECKPOINT_SECONDS.labels("take").observe(time.perf_counter() - started)
        await self._bound(repo, cid)
        return cp

    async def _bound(self, repo: GitRepo, cid: str) -> None:
        """CHECKPOINT_MAX_MB: the oldest checkpoints pruned until the repository fits (the
        newest is always kept)."""
        if await self.store.checkpoint_bytes(cid) <= self.max_bytes:
            return  # (the sum of what each added: the repository holds no more)
        used = await anyio.to_thread.run_sync(repo.objects_bytes)
        if used <= self.max_bytes:
            return
        rows = await self.store.checkpoints_of(cid)
        for oldest, following in itertools.pairwise(rows):

            def prune(seq: int = oldest.seq, nxt: str = following.commit) -> tuple[int, int]:
                repo.drop_refs([f"{REF_PREFIX}{seq}"])
                repo.prune()
                return repo.objects_bytes(), repo.disk_usage(nxt)

            used, now_first = await self._off_loop(cid, prune)
            await self.store.delete_checkpoints(cid, [oldest.seq])
            # the oldest one left holds all it needs now, not only what it added
            await self.store.update_checkpoint_bytes(cid, following.seq, now_first)
            CHECKPOINTS.labels("pruned").inc()
            log.info(
                "checkpoint of conversation %s at seq %s pruned: its checkpoints took more "
                "than CHECKPOINT_MAX_MB (%s MB; %s bytes now)",
                cid,
                oldest.seq,
                self.max_bytes // MB,
                used,
            )
            if used <= self.max_bytes:
                break

    # -- reading ------------------------------------------------------------------------------
    async def listed(self, cid: str) -> list[StoredCheckpoint]:
        return await self.store.checkpoints_of(cid)

    async def at(self, cid: str, seq: int) -> StoredCheckpoint:
        cp = await self.store.checkpoint_at(cid, seq)
        if cp is None:
            raise CheckpointNotFound(f"No checkpoint at seq {seq}.")
        return cp

    async def diff(self, repo: GitRepo, cid: str, seq: int, to: int | None) -> list[FileDiff]:
        """From the checkpoint ``seq`` to ``to`` (None: the workspace now)."""
        old = await self.at(cid, seq)
        new = await self.at(cid, to) if to is not None else None

        def work() -> list[FileDiff]:
            if new is not None:
                target = new.commit
            else:
                with tempfile.TemporaryDirectory() as tmp:
                    target = repo.with_index(Path(tmp) / "index").snapshot().commit
            return [_file_diff(repo, ch) for ch in repo.changes(old.commit, target)]

        return await anyio.to_thread.run_sync(work)

    # -- rewind and fork ---------------------------------------------------------------------
    async def rewind(
        self, repo: GitRepo, cid: str, seq: int, before: Callable[[], Awaitable[None]]
    ) -> int:
        """The workspace as it was at ``seq``, the later messages out of the history.
        ``before``: stops what could write to the workspace (its previews). Raises
        CheckpointNotFound, ConflictError (a run is active or waiting). Returns the number
        of files (and links) the workspace holds now."""
        cp = await self.at(cid, seq)
        if await self.store.running_run_of(cid) is not None:
            raise ConflictError(cid)
        await before()
        started = time.perf_counter()
        # the history first, in the transaction that checks (under the conversation's row
        # lock, as a run's start takes it) that no run began meanwhile: a run that starts
        # after it goes on from the rewound history, never from the one a rewind refused.
        # It also takes the conversation while the files are put back: a run asked for
        # meanwhile (on any replica) is refused, never started on half of them
        await self.store.rewind_history(cid, seq)

        def work() -> int:
            repo.workspace.mkdir(parents=True, exist_ok=True)
            repo.restore(cp.commit)
            return len(repo.files(cp.commit))

        try:
            files = await self._off_loop(cid, work)
        finally:
            await self.store.restored(cid)
        CHECKPOINT_SECONDS.labels("rewind").observe(time.perf_counter() - started)
        return files

    async def run_began(self, repo: GitRepo, cid: str) -> None:
        """A new run: what a rewind took away is dropped for good (no redo past here)."""
        seqs = await self.store.drop_rewound(cid)
        if seqs:
            await self._off_loop(cid, lambda: repo.drop_refs(f"{REF_PREFIX}{s}" for s in seqs))

    async def fork(
        self,
        user_id: str,
        repo: GitRepo,
        cid: str,
        seq: int,
        title: str,
        workspace_of: Callable[[str], Path],
    ) -> str:
        """A new conversation of ``user_id``: the history up to ``seq``, that checkpoint's
        files; ``workspace_of(new id)`` is its folder. Returns its id."""
        await self.at(cid, seq)
        new = new_id()
        started = time.perf_counter()
        kept = await self.store.fork_conversation(user_id, cid, new, seq, title)
        target = self.repo(user_id, new, workspace_of(new))
        commits = [cp.commit for cp in kept]
        at = next(cp.commit for cp in kept if cp.seq == seq)

        def work() -> None:
            repo.copy_objects_to(target, commits)
            for cp in kept:
                target.keep(f"{REF_PREFIX}{cp.seq}", cp.commit)
            target.checkout_into_empty(at)

        try:
            await anyio.to_thread.run_sync(work)
        except (GitError, OSError):
            await self.store.delete_conversation(user_id, new)
            await anyio.to_thread.run_sync(target.remove)
            raise
        CHECKPOINT_SECONDS.labels("fork").observe(time.perf_counter() - started)
        return new

    async def forget(self, repo: GitRepo, cid: str) -> None:
        """The conversation was deleted: its repository goes too."""
        await self._off_loop(cid, repo.remove)
        self._locks.pop(cid, None)

    # -- shares --------------------------------------------------------------------------------
    async def share(self, repo: GitRepo, user_id: str, cid: str, title: str) -> StoredShare:
        token = secrets.token_urlsafe(24)
        seqs = await self.store.history_seqs(cid)

        def work() -> str:
            with tempfile.TemporaryDirectory() as tmp:
                repo.init()
                commit = repo.with_index(Path(tmp) / "index").snapshot().commit
            repo.keep(f"{SHARE_PREFIX}{token}", commit)
            return commit

        commit = await anyio.to_thread.run_sync(work)
        share = StoredShare(
            token=token,
            conversation_id=cid,
            user_id=user_id,
            seq=seqs[-1] if seqs else 0,
            commit=commit,
            title=title,
            seqs=json.dumps(seqs),
            created_at=utcnow(),
        )
        await self.store.add_share(share)
        return share

    async def revoke(self, repo: GitRepo, cid: str) -> int:
        tokens = await self.store.revoke_shares(cid)
        if tokens:
            await anyio.to_thread.run_sync(
                lambda: repo.drop_refs(f"{SHARE_PREFIX}{t}" for t in tokens)
            )
        return len(tokens)

    async def shared_files(self, repo: GitRepo, share: StoredShare) -> list[SharedFile]:
        entries = await anyio.to_thread.run_sync(repo.files, share.commit)
        return [SharedFile(path, size, mode == "120000") for path, mode, size in entries]

    async def shared_file(
        self, repo: GitRepo, share: StoredShare, path: str
    ) -> tuple[int, AsyncIterator[bytes]]:
        """A regular file of the share's snapshot (a link is never served): its size and
        its bytes, streamed from git (never read whole into memory)."""

        def find() -> tuple[str, int]:
            found = repo.entry(share.commit, path)
            if found is None or found[0] not in ("100644", "100755"):
                raise CheckpointNotFound(f"No file {path!r} in this share.")
            return found[1], repo.size(found[1])

        sha, size = await anyio.to_thread.run_sync(find)
        cmd, env = repo.blob_command(sha)
        return size, _stream(cmd, env)


async def _stream(cmd: list[str], env: dict[str, str]) -> AsyncIterator[bytes]:
    proc = await asyncio.create_subprocess_exec(
        *cmd, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.DEVNULL, env=env
    )
    assert proc.stdout is not None
    try:
        while chunk := await proc.stdout.read(STREAM_CHUNK):
            yield chunk
    finally:
        if proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
        await proc.wait()


def _file_diff(repo: GitRepo, ch: Change) -> FileDiff:
    link = "120000" in (ch.old_mode, ch.new_mode)
    if link:
        return FileDiff(ch.path, ch.change, "link")
    old = repo.blob(ch.old_sha) if ch.change != "added" else b""
    new = repo.blob(ch.new_sha) if ch.change != "removed" else b""
    old_text, new_text = _text(old), _text(new)
    if old_text is None or new_text is None:
        return FileDiff(ch.path, ch.change, "binary")
    if max(len(old), len(new)) > DIFF_MAX_BYTES:
        return FileDiff(ch.path, ch.change, "text")
    lines = difflib.unified_diff(
        old_text.splitlines(keepends=True),
        new_text.splitlines(keepends=True),
        fromfile="/dev/null" if ch.change == "added" else f"a/{ch.path}",
        tofile="/dev/null" if ch.change == "removed" else f"b/{ch.path}",
    )
    return FileDiff(ch.path, ch.change, "text", "".join(lines))


def _text(data: bytes) -> str | None:
    if b"\0" in data[:8192]:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None
