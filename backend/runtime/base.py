"""The Runtime seam: the workspace operations (write, edit, read, run), small backend hooks.

The actions that use them are defined in the action registry (backend/actions/registry).

Both backends (local, docker) inherit :class:`BaseRuntime`. It confines paths, reads, writes
and edits files on the host side of the workspace (the docker runtime bind-mounts the same
folder) through :mod:`backend.runtime.confined` (descriptors, no symlink races), enforces
``WORKSPACE_MAX_MB``, caps output and shapes results. A backend only implements
:meth:`_run_command`. Failures come back as results, never as exceptions (cancellation
propagates).
"""

from __future__ import annotations

import errno
import logging
import os
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Generic, Protocol

import anyio

from backend.runtime import confined
from backend.runtime.paths import PathEscapeError

if TYPE_CHECKING:
    from backend.config import Settings

OUTPUT_CAP = 16_000  # characters kept of each of stdout / stderr
READ_CAP = 100_000  # characters returned by read_file


@dataclass
class ActionResult:
    status: str  # "success" | "failure"
    content: str
    filepath: str = ""
    # what the cards show (the message's meta.json): a command's exit code and output, an
    # edit's diff; ``content`` stays the words for the person and the model
    data: list[dict[str, Any]] = field(default_factory=list)

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
    stopped: str = ""  # why a limit stopped the command (the result's first line)


# on_output(stream, data): a running command printed ``data`` on "stdout" or "stderr".
# Called on the event loop, in order, while the command runs (live deltas); the result
# still carries the whole (capped) output.
OutputCallback = Callable[[str, bytes], None]

log = logging.getLogger(__name__)


def hand_output(on_output: OutputCallback | None, stream: str, data: bytes) -> None:
    """Give ``data`` to ``on_output``; a failing callback never disturbs the command."""
    if on_output is None or not data:
        return
    try:
        on_output(stream, data)
    except Exception:
        log.exception("the output callback failed")


@dataclass(frozen=True)
class PromptNote:
    """How the prompts tell the model where its commands run."""

    planning: str  # the planner's "running shell commands (<planning>)"
    thinking: str  # the task loop's "working in a workspace folder (<thinking>)"


class RuntimeUnavailable(Exception):
    """The backend cannot run actions now (no engine, no image, a dead container).

    ``execute`` turns it into a failure result; the message says what to do about it.
    """


class RuntimeOperations(Protocol):
    """The workspace operations the actions' handlers call: the one place a new one is
    declared (its implementation goes in :class:`BaseRuntime`). A run's view of its
    runtime (backend/runs/stop_checked.py) checks the run's stop flag before each of them,
    read from here."""

    async def write_file(self, workspace: Path, path: str, content: str) -> ActionResult: ...

    async def edit_file(
        self, workspace: Path, path: str, old_str: str, new_str: str
    ) -> ActionResult: ...

    async def read_file(self, workspace: Path, path: str) -> ActionResult: ...

    async def run_command(
        self,
        workspace: Path,
        command: str,
        cwd: str | None = None,
        on_output: OutputCallback | None = None,
    ) -> ActionResult: ...


def operation_names() -> frozenset[str]:
    """The names of :class:`RuntimeOperations`' operations (its own and its bases')."""
    return frozenset(
        name
        for cls in RuntimeOperations.__mro__
        if cls not in (Protocol, Generic, object)
        for name, value in vars(cls).items()
        if callable(value) and not name.startswith("_")
    )


class Runtime(RuntimeOperations, Protocol):
    """A runtime: its operations, its name, the prompts' words and its life cycle."""

    name: str

    @property
    def prompt_note(self) -> PromptNote:
        """How the prompts tell the model where commands run (planning, task loop)."""

    async def start(self) -> None:
        """Called once when the server starts (e.g. reap orphans of a crash)."""

    async def available(self) -> bool:
        """Whether it can run actions here (the server's probe at start, after ``start``)."""

    async def forget(self, workspace: Path) -> None:
        """The conversation owning ``workspace`` was deleted: drop what it holds."""

    async def reap_owners(self, owners: Iterable[str]) -> int:
        """Remove what the given dead owner processes left (their sandboxes); how many."""

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


def file_failure(verb: str, path: str, exc: OSError, rel: str = "") -> ActionResult:
    """What a workspace file operation's OSError tells the model: a missing file, a directory
    where a file was wanted, or the system's words (``rel``: the file the result shows).
    A path out of the workspace is no OSError: its PathEscapeError goes up to the caller."""
    if isinstance(exc, FileNotFoundError):
        message = f"File {path} does not exist."
    elif isinstance(exc, IsADirectoryError):
        message = f"{path} is a directory, not a file."
    else:
        return ActionResult("failure", f"Could not {verb} {path}: {exc.strerror or exc}", rel)
    return ActionResult("failure", message, rel or path)


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
    elif out.stopped:
        head, status = out.stopped, "failure"
    else:
        head = f"Exit code: {out.exit_code}"
        status = "success" if out.exit_code == 0 else "failure"
    parts = [head]
    if out.note:
        parts.append(out.note)
    parts.append(f"stdout:\n{stdout}" if stdout else "stdout: (empty)")
    parts.append(f"stderr:\n{stderr}" if stderr else "stderr: (empty)")
    shown = {
        "command": command,
        "exit_code": None if out.timed_out else out.exit_code,
        "stdout": stdout,
        "stderr": stderr,
        "timed_out": out.timed_out,
        "note": "\n".join(n for n in (out.stopped, out.note) if n),
    }
    return ActionResult(status, "\n".join(parts), data=[shown])


MB = 1024 * 1024


class BaseRuntime:
    """A runtime: subclass it in a module of its own and add its line to ``BUILTIN`` in
    :mod:`backend.runtime.registry` (a deployment's: ``RUNTIME_MODULES``)."""

    name = "base"
    # the local runtime's words: a runtime whose commands run elsewhere says where
    prompt_note: ClassVar[PromptNote] = PromptNote(
        planning="on this machine", thinking="commands run in this folder"
    )
    # False: offered only once the server's probe at start-up found it working (a runtime
    # that needs an engine, an image, a tool); ``unavailable_note`` then says what is missing
    always_available: ClassVar[bool] = True
    unavailable_note: ClassVar[str] = ""

    @classmethod
    def from_settings(cls, settings: Settings, *, owner: str | None = None) -> BaseRuntime:
        """The runtime as a server process makes it; ``owner`` is the process's instance id
        (a runtime that leaves things outside the process labels them with it)."""
        return cls(
            terminal_timeout=settings.terminal_timeout, workspace_max_mb=settings.workspace_max_mb
        )

    def __init__(self, terminal_timeout: float = 120.0, workspace_max_mb: float = 1024) -> None:
        self.terminal_timeout = terminal_timeout
        self.workspace_max_mb = workspace_max_mb

    @property
    def workspace_max_bytes(self) -> int:
        return int(self.workspace_max_mb * MB)

    # ---- the operations the sandbox actions' handlers call -----------------------------

    async def write_file(self, workspace: Path, path: str, content: str) -> ActionResult:
        return await self._guarded(
            workspace, path, lambda: self._write_code(path, content, workspace)
        )

    async def edit_file(
        self, workspace: Path, path: str, old_str: str, new_str: str
    ) -> ActionResult:
        return await self._guarded(
            workspace, path, lambda: self._edit_file(path, old_str, new_str, workspace)
        )

    async def read_file(self, workspace: Path, path: str) -> ActionResult:
        return await self._guarded(workspace, path, lambda: self._read_file(path, workspace))

    async def run_command(
        self,
        workspace: Path,
        command: str,
        cwd: str | None = None,
        on_output: OutputCallback | None = None,
    ) -> ActionResult:
        return await self._guarded(
            workspace, "", lambda: self._terminal_run(command, cwd, workspace, on_output)
        )

    async def _guarded(
        self, workspace: Path, path: str, op: Callable[[], Awaitable[ActionResult]]
    ) -> ActionResult:
        """The shared part of every operation: the workspace made ready, failures turned
        into results (cancellation propagates)."""
        try:
            workspace.mkdir(parents=True, exist_ok=True)
            await self._prepare(workspace)
            return await op()
        except PathEscapeError as exc:
            return ActionResult(
                "failure",
                f"Refused: {exc}. Paths must stay inside the workspace (relative paths, or "
                "absolute paths under /workspace).",
                path,
            )
        except RuntimeUnavailable as exc:
            return ActionResult("failure", f"The {self.name} runtime is unavailable: {exc}")
        except UnicodeEncodeError:
            return ActionResult(
                "failure",
                "The action holds text that is not valid Unicode (a lone surrogate escape); "
                "write the characters themselves.",
                path,
            )
        except OSError as exc:
            return ActionResult("failure", f"Workspace error: {exc.strerror or exc}")

    async def start(self) -> None:
        return None

    async def available(self) -> bool:
        return True

    async def forget(self, workspace: Path) -> None:
        return None

    async def reap_owners(self, owners: Iterable[str]) -> int:
        return 0  # nothing outlives its owner here

    async def close(self) -> None:
        return None

    async def _prepare(self, workspace: Path) -> None:
        """Backend hook run before every action on an existing ``workspace``."""
        return None

    def _file_owner(self, workspace: Path) -> tuple[int, int] | None:
        """uid/gid that files written host-side should get (``None``: the server's)."""
        return None

    # ---- the workspace size limit ------------------------------------------------------

    def _over_limit(self, path: str, used: int, new_total: int) -> ActionResult:
        return ActionResult(
            "failure",
            f"Refused: writing {path} would bring the workspace to {new_total / MB:.1f} MB, "
            f"over its limit of {self.workspace_max_mb:g} MB (WORKSPACE_MAX_MB; it holds "
            f"{used / MB:.1f} MB now). Delete files that are not needed (build outputs, "
            "downloads) with terminal_run, or write less.",
        )

    # ---- file actions (host side, through race-free descriptors) -----------------------

    async def _write_code(self, path: str, content: str, workspace: Path) -> ActionResult:
        data = content.encode("utf-8")
        owner = self._file_owner(workspace)

        def write() -> ActionResult:
            old, rel = confined.file_size(workspace, path.strip())
            used = confined.usage(workspace)
            new_total = used - (old or 0) + len(data)
            if len(data) > (old or 0) and new_total > self.workspace_max_bytes:
                result = self._over_limit(path, used, new_total)
                result.filepath = rel
                return result
            try:
                rel = confined.write_atomic(workspace, path.strip(), data, owner)
            except OSError as exc:
                return file_failure("write", path, exc, rel)
            return ActionResult("success", f"File {path} written successfully.", rel)

        return await anyio.to_thread.run_sync(write)

    async def _edit_file(
        self, path: str, old_str: str, new_str: str, workspace: Path
    ) -> ActionResult:
        old = old_str.encode("utf-8")
        new = new_str.encode("utf-8")
        if not old:
            return ActionResult(
                "failure",
                "edit_file needs a non-empty old_str: the exact text to replace. To write a "
                "whole file use write_code.",
                path,
            )
        owner = self._file_owner(workspace)

        def edit() -> ActionResult:
            used = confined.usage(workspace) if len(new) > len(old) else 0
            limit = self.workspace_max_bytes if len(new) > len(old) else None
            try:
                done = confined.edit_exact(workspace, path.strip(), old, new, owner, limit, used)
            except OSError as exc:
                if exc.errno == errno.EDQUOT:
                    grown = used + len(new) - len(old)
                    return self._over_limit(path, used, grown)
                if exc.errno == errno.EFBIG:
                    return ActionResult(
                        "failure",
                        f"{path} is larger than {confined.EDIT_MAX // MB} MB: edit_file "
                        "cannot change it; use terminal_run (sed, python).",
                        path,
                    )
                return file_failure("edit", path, exc)
            if done.count == 0:
                return ActionResult(
                    "failure",
                    f"old_str was not found in {path} (0 occurrences). It must match the "
                    "file byte for byte, whitespace and line breaks included: read the file "
                    "and copy the text exactly.",
                    done.rel,
                )
            if done.count > 1:
                many = f"{done.count}" if done.count < 1000 else "1000 or more"
                return ActionResult(
                    "failure",
                    f"old_str occurs {many} times in {path}; it must occur exactly once. "
                    "Include more of the surrounding lines to make it unique. Nothing was "
                    "changed.",
                    done.rel,
                )
            return ActionResult(
                "success",
                f"File {path} edited successfully.",
                done.rel,
                data=[{"path": done.rel, "diff": done.diff}],
            )

        return await anyio.to_thread.run_sync(edit)

    async def _read_file(self, path: str, workspace: Path) -> ActionResult:

        def read() -> ActionResult:
            try:
                fd, rel = confined.open_read(workspace, path.strip())
            except OSError as exc:
                return file_failure("read", path, exc)
            try:
                size = os.fstat(fd).st_size
                data = confined.read_fd(fd, READ_CAP * 4 + 1)
            finally:
                os.close(fd)
            if b"\x00" in data[:8192]:
                return ActionResult(
                    "success", f"{path} is a binary file ({size} bytes); not shown as text.", rel
                )
            text = data.decode("utf-8", "replace")
            if len(text) > READ_CAP or len(data) > READ_CAP * 4:
                text = (
                    text[:READ_CAP]
                    + f"\n[... file is {size} bytes; only the first {READ_CAP} characters "
                    "are shown. Read a part with terminal_run (sed -n, head, tail) ...]"
                )
            return ActionResult("success", text, rel)

        return await anyio.to_thread.run_sync(read)

    async def _terminal_run(
        self,
        command: str,
        cwd_given: str | None,
        workspace: Path,
        on_output: OutputCallback | None = None,
    ) -> ActionResult:
        if not command.strip():
            return ActionResult("failure", "Empty command.")
        cwd_param = cwd_given or "."

        def check_cwd() -> str | None:
            try:
                fd, rel = confined.open_dir(workspace, cwd_param.strip())
            except (FileNotFoundError, NotADirectoryError):
                return None
            os.close(fd)
            return rel

        cwd = await anyio.to_thread.run_sync(check_cwd)
        if cwd is None:
            return ActionResult("failure", f"cwd {cwd_given!r} is not a directory.")
        out = await self._run_command(command, workspace, cwd, on_output)
        result = format_command_result(command, out, self.terminal_timeout)
        used = await anyio.to_thread.run_sync(confined.usage, workspace)
        if used > self.workspace_max_bytes:
            result.status = "failure"
            over = (
                f"The workspace now holds {used / MB:.1f} MB, over its limit of "
                f"{self.workspace_max_mb:g} MB (WORKSPACE_MAX_MB): file writes are refused "
                "until files are deleted (build outputs, downloads, caches)."
            )
            result.content += "\n" + over
            for shown in result.data:
                shown["note"] = "\n".join(n for n in (shown.get("note"), over) if n)
        return result

    async def _run_command(
        self,
        command: str,
        workspace: Path,
        cwd: str,
        on_output: OutputCallback | None = None,
    ) -> CommandOutput:
        """Run ``command`` with ``cwd`` (workspace-relative), killing it after the timeout,
        handing its output to ``on_output`` (see :func:`hand_output`) as it is printed.

        When it returns, times out or is cancelled, no process the command started may be
        left. Cancellation must kill the command and all its processes before re-raising.
        """
        raise NotImplementedError
