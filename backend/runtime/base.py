"""The Runtime seam: one public ``execute`` that does the shared work, small backend hooks.

Both backends (local, docker) inherit :class:`BaseRuntime`. It confines paths, reads and
writes files on the host side of the workspace (the docker runtime bind-mounts the same
folder), caps output and shapes results. A backend only implements :meth:`_run_command`.
Failures come back as results, never as exceptions.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import anyio

from backend.actions.model import Action
from backend.runtime.paths import PathEscapeError, relative_name, resolve_in_workspace

OUTPUT_CAP = 16_000  # characters kept of each of stdout / stderr
READ_CAP = 100_000  # characters returned by read_file


@dataclass
class ActionResult:
    status: str  # "success" | "failure"
    content: str
    filepath: str = ""

    @property
    def ok(self) -> bool:
        return self.status == "success"


@dataclass
class CommandOutput:
    exit_code: int | None  # None when killed by the timeout
    stdout: bytes
    stderr: bytes
    timed_out: bool = False
    note: str = ""  # backend-specific remark (e.g. "killed: out of memory")
    stdout_dropped: int = 0  # bytes dropped from the middle by the capped reader
    stderr_dropped: int = 0


# on_output(stream, data): a running command printed ``data`` on "stdout" or "stderr".
# Called on the event loop, in order, while the command runs (live deltas); the result
# still carries the whole (capped) output.
OutputCallback = Callable[[str, bytes], None]


class RuntimeUnavailable(Exception):
    """The backend cannot run actions now (no engine, no image, a dead container).

    ``execute`` turns it into a failure result; the message says what to do about it.
    """


class Runtime(Protocol):
    name: str

    async def execute(
        self, action: Action, workspace: Path, on_output: OutputCallback | None = None
    ) -> ActionResult: ...

    async def start(self) -> None:
        """Called once when the server starts (e.g. reap orphans of a crash)."""

    async def forget(self, workspace: Path) -> None:
        """The conversation owning ``workspace`` was deleted: drop what it holds."""

    async def close(self) -> None: ...


def cap_text(text: str, limit: int = OUTPUT_CAP, dropped: int = 0) -> str:
    """Keep the head and the tail of a long text with a note of what was cut."""
    if len(text) <= limit and not dropped:
        return text
    if len(text) <= limit:
        head, tail, cut = text, "", dropped
    else:
        half = limit // 2
        head, tail = text[:half], text[-half:]
        cut = len(text) - 2 * half + dropped
    return f"{head}\n[... {cut} characters cut from the middle of the output ...]\n{tail}"


class HeadTail:
    """Collect a byte stream keeping only its first and last ``keep`` bytes."""

    def __init__(self, keep: int = OUTPUT_CAP * 4) -> None:
        self.keep = keep
        self.head = bytearray()
        self.tail = bytearray()
        self.dropped = 0

    def feed(self, chunk: bytes) -> None:
        room = self.keep - len(self.head)
        if room > 0:
            self.head += chunk[:room]
            chunk = chunk[room:]
        if not chunk:
            return
        self.tail += chunk
        if len(self.tail) > self.keep:
            extra = len(self.tail) - self.keep
            self.dropped += extra
            del self.tail[:extra]

    def value(self) -> bytes:
        return bytes(self.head + self.tail)


def format_command_result(command: str, out: CommandOutput, timeout: float) -> ActionResult:
    stdout = cap_text(out.stdout.decode("utf-8", "replace"), dropped=out.stdout_dropped)
    stderr = cap_text(out.stderr.decode("utf-8", "replace"), dropped=out.stderr_dropped)
    if out.timed_out:
        head = (
            f"Command timed out after {timeout:g} seconds and was killed with all its "
            "processes. Run long-lived programs (servers, watchers) in the background with "
            "a time limit, or not at all."
        )
        status = "failure"
    else:
        head = f"Exit code: {out.exit_code}"
        status = "success" if out.exit_code == 0 else "failure"
    parts = [head]
    if out.note:
        parts.append(out.note)
    parts.append(f"stdout:\n{stdout}" if stdout else "stdout: (empty)")
    parts.append(f"stderr:\n{stderr}" if stderr else "stderr: (empty)")
    return ActionResult(status, "\n".join(parts))


class BaseRuntime:
    name = "base"

    def __init__(self, terminal_timeout: float = 120.0) -> None:
        self.terminal_timeout = terminal_timeout

    async def execute(
        self, action: Action, workspace: Path, on_output: OutputCallback | None = None
    ) -> ActionResult:
        try:
            workspace.mkdir(parents=True, exist_ok=True)
            await self._prepare(workspace)
            if action.type == "write_code":
                return await self._write_code(action, workspace)
            if action.type == "read_file":
                return await self._read_file(action, workspace)
            if action.type == "terminal_run":
                return await self._terminal_run(action, workspace, on_output)
            if action.type == "finish":
                return ActionResult("success", action.params.get("message", ""))
            return ActionResult("failure", f"Unknown action {action.type!r}.")
        except PathEscapeError as exc:
            return ActionResult(
                "failure",
                f"Refused: {exc}. Paths must stay inside the workspace (relative paths, or "
                "absolute paths under /workspace).",
                action.params.get("path", ""),
            )
        except RuntimeUnavailable as exc:
            return ActionResult("failure", f"The {self.name} runtime is unavailable: {exc}")
        except OSError as exc:
            return ActionResult("failure", f"Workspace error: {exc.strerror or exc}")

    async def start(self) -> None:
        return None

    async def forget(self, workspace: Path) -> None:
        return None

    async def close(self) -> None:
        return None

    async def _prepare(self, workspace: Path) -> None:
        """Backend hook run before every action on an existing ``workspace``."""
        return None

    def _file_owner(self, workspace: Path) -> tuple[int, int] | None:
        """uid/gid that files written host-side should get (``None``: the server's)."""
        return None

    async def _write_code(self, action: Action, workspace: Path) -> ActionResult:
        path = action.params.get("path", "")
        content = action.params.get("content", "")
        real = resolve_in_workspace(workspace, path)
        rel = relative_name(workspace, real)
        if real.is_dir():
            return ActionResult("failure", f"{path} is a directory.", rel)
        try:
            await anyio.to_thread.run_sync(
                _write_exact, workspace, real, content, self._file_owner(workspace)
            )
        except OSError as exc:
            return ActionResult("failure", f"Could not write {path}: {exc.strerror or exc}", rel)
        return ActionResult("success", f"File {path} written successfully.", rel)

    async def _read_file(self, action: Action, workspace: Path) -> ActionResult:
        path = action.params.get("path", "")
        real = resolve_in_workspace(workspace, path)
        rel = relative_name(workspace, real)
        if not real.is_file():
            return ActionResult("failure", f"File {path} does not exist.", rel)
        try:
            data = await anyio.to_thread.run_sync(_read_head, real, READ_CAP * 4 + 1)
        except OSError as exc:
            return ActionResult("failure", f"Could not read {path}: {exc.strerror or exc}", rel)
        if b"\x00" in data[:8192]:
            size = real.stat().st_size
            return ActionResult(
                "success", f"{path} is a binary file ({size} bytes); not shown as text.", rel
            )
        text = data.decode("utf-8", "replace")
        if len(text) > READ_CAP or len(data) > READ_CAP * 4:
            size = real.stat().st_size
            text = (
                text[:READ_CAP]
                + f"\n[... file is {size} bytes; only the first {READ_CAP} characters are "
                "shown. Read a part with terminal_run (sed -n, head, tail) ...]"
            )
        return ActionResult("success", text, rel)

    async def _terminal_run(
        self, action: Action, workspace: Path, on_output: OutputCallback | None = None
    ) -> ActionResult:
        command = action.params.get("command", "")
        if not command.strip():
            return ActionResult("failure", "Empty command.")
        cwd = resolve_in_workspace(workspace, action.params.get("cwd") or ".")
        if not cwd.is_dir():
            return ActionResult("failure", f"cwd {action.params.get('cwd')!r} is not a directory.")
        out = await self._run_command(command, workspace, relative_name(workspace, cwd), on_output)
        return format_command_result(command, out, self.terminal_timeout)

    async def _run_command(
        self,
        command: str,
        workspace: Path,
        cwd: str,
        on_output: OutputCallback | None = None,
    ) -> CommandOutput:
        """Run ``command`` with ``cwd`` (workspace-relative), killing it after the timeout,
        handing its output to ``on_output`` as it is printed.

        Cancellation must kill the command and all its processes before re-raising.
        """
        raise NotImplementedError


def _write_exact(
    workspace: Path, real: Path, content: str, owner: tuple[int, int] | None = None
) -> None:
    if owner is not None and owner == (os.geteuid(), os.getegid()):
        owner = None
    created: list[Path] = []
    parent = real.parent
    while not parent.exists() and parent != parent.parent:
        created.append(parent)
        parent = parent.parent
    real.parent.mkdir(parents=True, exist_ok=True)
    # re-check after creating parents: a symlinked parent must not lead outside
    resolve_in_workspace(workspace, str(real))
    if owner is not None:
        for folder in created:
            os.chown(folder, *owner, follow_symlinks=False)
    fd, tmp = tempfile.mkstemp(dir=real.parent, prefix=".planact-", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(content.encode("utf-8"))
            if owner is not None:
                os.fchown(fh.fileno(), *owner)
        os.chmod(tmp, 0o644)
        os.replace(tmp, real)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def _read_head(real: Path, limit: int) -> bytes:
    with open(real, "rb") as fh:
        return fh.read(limit)
