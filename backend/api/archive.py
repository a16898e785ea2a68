"""The workspace as a zip, streamed as it is made: counted before any byte, a bounded number
at once, and stopped with its client.

- Counted by apparent size (``st_size``: a sparse file counts its full size): over
  ``WORKSPACE_MAX_MB`` the request is refused before anything is zipped.
- At most ``ZIP_MAX_CONCURRENT`` zips at once in a server process; one more is refused at
  once (429 with ``Retry-After``), never queued.
- No temporary file: :func:`stream_zip` (stream-zip) makes the zip chunk by chunk; each chunk
  is made in a worker thread for that chunk only (a bounded amount of reading and deflating),
  so a client that leaves stops the work at the next chunk and every descriptor is closed.
- Files are opened beneath the workspace's descriptor (:mod:`backend.runtime.confined`), no
  symlink followed out; each is read up to its size when opened, and one that would take
  the total past the budget (grown since it was counted) is left out like a file gone.
"""

from __future__ import annotations

import logging
import os
import stat
import zlib
from collections.abc import AsyncIterator, Generator, Iterator
from datetime import datetime
from pathlib import Path

import anyio
from starlette.responses import StreamingResponse
from starlette.types import Receive, Scope, Send
from stream_zip import ZIP_AUTO, MemberFile, stream_zip

from backend.runtime import confined
from backend.runtime.paths import PathEscapeError
from backend.workspace import scan

log = logging.getLogger(__name__)

MB = 1024 * 1024
LEVEL = 6  # zlib's default: level 9 costs far more CPU for a few per cent
# the times a zip entry can hold: from 1980-01-01 (MS-DOS dates) to 2038-01-19 (the
# extended timestamp is a signed 32-bit count of seconds); a file's time is moved inside
OLDEST = 315532800
NEWEST = 2**31 - 1
RETRY_AFTER_S = 5


class TooLarge(Exception):
    def __init__(self, total: int) -> None:
        super().__init__(total)
        self.total = total


class ZipSlots:
    """How many zips run at once in this process (one event loop: a plain counter)."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.busy = 0

    def take(self) -> bool:
        if self.busy >= self.limit:
            return False
        self.busy += 1
        return True

    def give(self) -> None:
        self.busy -= 1


def plan(workspace: Path, budget: int) -> list[str]:
    """The files to zip, sorted; raises :class:`TooLarge` when their apparent sizes add up
    to more than ``budget`` bytes."""
    files = scan(workspace)
    total = sum(size for size, _mtime in files.values())
    if total > budget:
        raise TooLarge(total)
    return sorted(files)


class WorkspaceZip:
    """A zip of ``files`` made one chunk per :meth:`next_chunk` call (from a worker thread,
    one call at a time); :meth:`close` stops it and closes every descriptor it opened."""

    def __init__(self, workspace: Path, files: list[str], budget: int) -> None:
        self.workspace = workspace
        self.files = files
        self.left = budget  # bytes still allowed to be read
        self.opened: set[int] = set()
        self._chunks: Generator[bytes, None, None] = stream_zip(  # type: ignore[assignment]
            self._members(),
            chunk_size=confined.CHUNK,
            get_compressobj=lambda: zlib.compressobj(LEVEL, wbits=-zlib.MAX_WBITS),
        )

    def next_chunk(self) -> bytes | None:
        """The next piece of the zip, or None at its end."""
        return next(self._chunks, None)

    def close(self) -> None:
        self._chunks.close()
        for fd in list(self.opened):
            self._close(fd)

    def _members(self) -> Iterator[MemberFile]:
        for rel in self.files:
            try:
                fd, _name = confined.open_read(self.workspace, rel)
            except (PathEscapeError, OSError):
                continue  # gone or swapped since the scan: left out
            self.opened.add(fd)
            st = os.fstat(fd)
            size = st.st_size
            if size > self.left:  # grown since it was counted: left out, as if gone
                log.warning("files.zip left out %r: the files grew past the budget", rel)
                self._close(fd)
                continue
            self.left -= size
            modified = datetime.fromtimestamp(min(max(st.st_mtime, OLDEST), NEWEST))
            mode = stat.S_IFREG | stat.S_IMODE(st.st_mode)
            yield rel, modified, mode, ZIP_AUTO(size, level=LEVEL), self._read(fd, size)

    def _read(self, fd: int, size: int) -> Iterator[bytes]:
        """The file's first ``size`` bytes (as it was when opened), then its descriptor
        closed."""
        try:
            left = size
            while left > 0:
                chunk = os.read(fd, min(left, confined.CHUNK))
                if not chunk:
                    break
                left -= len(chunk)
                yield chunk
        finally:
            self._close(fd)

    def _close(self, fd: int) -> None:
        if fd in self.opened:
            self.opened.discard(fd)
            os.close(fd)


async def _chunks(job: WorkspaceZip) -> AsyncIterator[bytes]:
    """Each chunk made in a worker thread, for that chunk only: a cancelled send (the client
    left) waits for at most one chunk's work, and no thread goes on zipping."""
    while (chunk := await anyio.to_thread.run_sync(job.next_chunk)) is not None:
        yield chunk


class ZipResponse(StreamingResponse):
    """The zip as a streamed body; however the response ends (done, client gone, cancelled,
    never started) the zip is closed (its descriptors with it) and its slot given back."""

    def __init__(self, job: WorkspaceZip, slots: ZipSlots, headers: dict[str, str]) -> None:
        super().__init__(_chunks(job), media_type="application/zip", headers=headers)
        self.job = job
        self.slots = slots

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            try:
                self.job.close()
            finally:
                self.slots.give()
