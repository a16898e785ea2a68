"""One conversation's checkpoints as a shadow git repository (the ``git`` program).

The repository is bare and lives under CHECKPOINT_DIR, never in the workspace. Its index
mirrors the workspace (git's stat cache: a file whose size and times did not change is not
read again), each checkpoint is a parentless commit of the workspace's tree under
``refs/checkpoints/<seq>`` (so pruning one frees what only it held), its message the
workspace's empty folders (git keeps no folder of its own).

Symlinks are stored as links (mode 120000) and never followed: the walk never enters one,
git records a link's target text, and a restore replaces links git put there (git's checkout
never writes through a symlink in a leading path). ``.git`` entries of the workspace (a
repository the agent made) are left out: git refuses such paths in a tree.
Every call blocks: callers run them on a worker thread.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import stat
import subprocess
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

REF_PREFIX = "refs/checkpoints/"
# git's empty tree (every git knows it without storing it): the checkpoint of a workspace
# that has held nothing yet, taken with no git command and no repository (a conversation of
# questions and answers pays nothing for its checkpoints)
EMPTY_TREE = "4b825dc642cb6eb9a060e54bf8d69288fbee4904"
SHARE_PREFIX = "refs/shares/"
# checked-in attributes of the workspace must never convert what is stored or restored
ATTRIBUTES = "* -text -filter -ident -working-tree-encoding !eol -diff -merge\n"
_CONFIG = (
    ("core.autocrlf", "false"),
    ("core.symlinks", "true"),
    ("core.fsmonitor", "false"),
    # stored as they are (zlib level 0): a checkout (fork) inflates nothing, a checkpoint
    # compresses nothing; what a checkpoint adds stays about the bytes that changed
    ("core.looseCompression", "0"),
    ("checkout.workers", "2"),
    ("gc.auto", "0"),
    ("core.quotePath", "false"),
)
_IDENTITY = {
    "GIT_AUTHOR_NAME": "planact",
    "GIT_AUTHOR_EMAIL": "planact@localhost",
    "GIT_COMMITTER_NAME": "planact",
    "GIT_COMMITTER_EMAIL": "planact@localhost",
    "GIT_AUTHOR_DATE": "@0 +0000",
    "GIT_COMMITTER_DATE": "@0 +0000",
}


class GitError(Exception):
    """A git command failed (its stderr in the message)."""


@dataclass(frozen=True)
class Snapshot:
    commit: str
    tree: str


@dataclass(frozen=True)
class Change:
    path: str
    change: str  # added | removed | changed
    old_mode: str
    new_mode: str
    old_sha: str
    new_sha: str


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env.update(_IDENTITY)
    env.update({"GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": os.devnull, "LC_ALL": "C"})
    env["GIT_LITERAL_PATHSPECS"] = "1"  # a path is a path: no glob, no pathspec magic
    return env


_ENV = _env()


class GitRepo:
    """The shadow repository at ``git_dir`` for the workspace ``workspace``."""

    def __init__(self, git_dir: Path, workspace: Path, index: Path | None = None) -> None:
        self.git_dir = git_dir
        self.workspace = workspace
        self.index = index  # None: the repository's own
        # the paths the index held after this object's last snapshot, with the index file's
        # (size, mtime_ns) then: reused while the file is unchanged (one `ls-files` less)
        self._indexed: tuple[tuple[int, int], set[bytes]] | None = None

    def with_index(self, index: Path) -> GitRepo:
        """The same repository over another index file (a copy: its stat cache holds)."""
        own = self.git_dir / "index"
        if own.is_file():
            shutil.copyfile(own, index)
        return GitRepo(self.git_dir, self.workspace, index)

    # -- plumbing ---------------------------------------------------------------------------
    def _git(self, *args: str, stdin: bytes | None = None, work_tree: bool = False) -> bytes:
        self.init()  # (an empty workspace's checkpoints are read before one is made)
        cmd = ["git", f"--git-dir={self.git_dir}"]
        if work_tree:
            cmd.append(f"--work-tree={self.workspace}")
        for key, value in _CONFIG:
            cmd += ["-c", f"{key}={value}"]
        cmd += args
        done = subprocess.run(
            cmd,
            input=stdin,
            capture_output=True,
            env=_ENV if self.index is None else {**_ENV, "GIT_INDEX_FILE": str(self.index)},
            cwd=self.workspace if work_tree else self.git_dir,
            check=False,
        )
        if done.returncode != 0:
            raise GitError(f"git {args[0]}: {done.stderr.decode(errors='replace').strip()}")
        return done.stdout

    @property
    def exists(self) -> bool:
        return (self.git_dir / "HEAD").is_file()

    def init(self) -> None:
        if self.exists:
            return
        self.git_dir.mkdir(parents=True, exist_ok=True)
        subprocess.run(  # no templates: no hooks, nothing to copy
            ["git", "init", "-q", "--bare", "--template=", str(self.git_dir)],
            capture_output=True,
            env=_ENV,
            check=True,
        )
        info = self.git_dir / "info"
        info.mkdir(exist_ok=True)
        (info / "attributes").write_text(ATTRIBUTES, encoding="utf-8")

    # -- taking one -----------------------------------------------------------------------
    def snapshot(self) -> Snapshot:
        """The workspace as it is now: its index brought up to date, its tree written, a
        commit of it (no parent) with the empty folders in its message; :data:`EMPTY_TREE`
        while the workspace has held nothing (no index yet, nothing in it)."""
        paths, empty = walk(self.workspace)
        if not paths and not empty and not self._index_file().exists():
            return Snapshot(commit=EMPTY_TREE, tree=EMPTY_TREE)
        self.init()
        self.workspace.mkdir(parents=True, exist_ok=True)
        indexed = self._indexed_paths()
        gone = indexed - paths
        if gone:
            self._git(
                "update-index", "-z", "--force-remove", "--stdin", stdin=_z(gone), work_tree=True
            )
        if paths:
            self._git(
                "update-index",
                "-z",
                "--add",
                "--replace",
                "--remove",
                "--stdin",
                stdin=_z(sorted(paths)),
                work_tree=True,
            )
        tree = self._git("write-tree").decode().strip()
        if (stamp := self._index_stamp()) is not None:
            self._indexed = (stamp, paths)
        message = json.dumps({"empty_dirs": sorted(os.fsdecode(p) for p in empty)})
        commit = self._git("commit-tree", tree, "-m", message).decode().strip()
        return Snapshot(commit=commit, tree=tree)

    def _index_file(self) -> Path:
        return self.index if self.index is not None else self.git_dir / "index"

    def _index_stamp(self) -> tuple[int, int] | None:
        try:
            st = os.stat(self._index_file())
        except OSError:
            return None
        return st.st_size, st.st_mtime_ns

    def _indexed_paths(self) -> set[bytes]:
        cached = self._indexed
        if cached is not None and cached[0] == self._index_stamp():
            return cached[1]
        return set(self._git("ls-files", "-z").split(b"\0")) - {b""}

    def keep(self, name: str, commit: str) -> None:
        if commit != EMPTY_TREE:  # (nothing stored to keep)
            self._git("update-ref", name, commit)

    def drop_refs(self, names: Iterable[str]) -> None:
        lines = "".join(f"delete {n}\n" for n in names)
        if lines:
            self._git("update-ref", "--stdin", stdin=lines.encode())

    def changes(self, old: str | None, new: str) -> list[Change]:
        """Paths added, removed or changed from ``old`` (None: nothing) to ``new``."""
        if old is None and new == EMPTY_TREE:
            return []
        if old is None:
            out = self._git("ls-tree", "-r", "-z", new)
            found = []
            for entry in out.split(b"\0"):
                if entry:
                    meta, path = entry.split(b"\t", 1)
                    mode, _kind, sha = meta.decode().split()
                    found.append(Change(os.fsdecode(path), "added", "000000", mode, "", sha))
            return found
        return self.diff(old, new)[0]

    def diff(self, old: str, new: str) -> tuple[list[Change], list[str]]:
        """(the paths that differ, the tree objects of ``new`` that ``old`` lacks)."""
        if old == new:  # (a commit is its tree and folders: its date is always the same)
            return [], []
        out = self._git("diff-tree", "-r", "-t", "-z", "--no-renames", old, new)
        parts = out.split(b"\0")
        found: list[Change] = []
        trees: list[str] = []
        for i in range(0, len(parts) - 1, 2):
            head = parts[i].decode()
            if not head.startswith(":"):
                continue
            old_mode, new_mode, old_sha, new_sha, status = head[1:].split()
            if "040000" in (old_mode, new_mode):
                if new_mode == "040000":
                    trees.append(new_sha)
                continue
            kind = {"A": "added", "D": "removed"}.get(status[0], "changed")
            found.append(
                Change(os.fsdecode(parts[i + 1]), kind, old_mode, new_mode, old_sha, new_sha)
            )
        return found, trees

    def loose_bytes(self, shas: Iterable[str]) -> int:
        """Bytes on disk of these loose objects (those that are loose)."""
        objects = self.git_dir / "objects"
        total = 0
        for sha in shas:
            with contextlib.suppress(OSError):
                total += os.lstat(objects / sha[:2] / sha[2:]).st_size
        return total

    def size(self, sha: str) -> int:
        return int(self._git("cat-file", "-s", sha).decode().strip())

    def blob_command(self, sha: str) -> tuple[list[str], dict[str, str]]:
        """The command (and its environment) that prints the blob ``sha``: for streaming."""
        return ["git", f"--git-dir={self.git_dir}", "cat-file", "blob", sha], dict(_ENV)

    def blob(self, sha: str) -> bytes:
        return self._git("cat-file", "blob", sha)

    def entry(self, commit: str, path: str) -> tuple[str, str] | None:
        """(mode, sha) of ``path`` in ``commit``'s tree, or None."""
        try:
            out = self._git("ls-tree", "-z", commit, "--", path)
        except GitError:  # a path git refuses (outside the tree): none
            return None
        for entry in out.split(b"\0"):
            if not entry:
                continue
            meta, name = entry.split(b"\t", 1)
            if os.fsdecode(name) == path:
                mode, _kind, sha = meta.decode().split()
                return mode, sha
        return None

    def files(self, commit: str) -> list[tuple[str, str, int]]:
        """(path, mode, size) of every entry of ``commit``'s tree."""
        out = self._git("ls-tree", "-r", "-z", "-l", commit)
        found = []
        for entry in out.split(b"\0"):
            if entry:
                meta, path = entry.split(b"\t", 1)
                mode, _kind, _sha, size = meta.decode().split()
                found.append((os.fsdecode(path), mode, int(size) if size != "-" else 0))
        return found

    def disk_usage(self, commit: str, other: list[str] | None = None) -> int:
        """Bytes on disk of what ``commit`` holds (with ``other``: of what it holds that
        none of them does)."""
        if commit == EMPTY_TREE:
            return 0
        args = ["rev-list", "--objects", "--disk-usage", commit]
        if other:  # their trees: git leaves a negative commit's tree out only at an edge
            args += ["--not", *(f"{c}^{{tree}}" for c in other)]
        return int(self._git(*args).decode().strip() or 0)

    def objects_bytes(self) -> int:
        total = 0
        for root, _dirs, names in os.walk(self.git_dir / "objects"):
            for name in names:
                with contextlib.suppress(OSError):
                    total += os.lstat(os.path.join(root, name)).st_size
        return total

    def prune(self) -> None:
        """Drop every object no ref holds any more."""
        self._git("prune", "--expire=now")

    # -- restoring ----------------------------------------------------------------------------
    def restore(self, commit: str) -> None:
        """The workspace exactly as ``commit`` holds it: the index first brought up to date
        with the workspace (so git knows every file and link there), then git moves the
        workspace to the commit's tree (removing what it lacks, never following a link),
        then the empty folders."""
        self.snapshot()
        self._git("read-tree", "-u", "--reset", commit, work_tree=True)
        self._folders(commit)

    def checkout_into_empty(self, commit: str) -> None:
        """``commit``'s files into the (new, empty) workspace."""
        self.init()
        self.workspace.mkdir(parents=True, exist_ok=True)
        self._git("read-tree", commit)
        self._git("checkout-index", "-a", "-f", work_tree=True)
        self._folders(commit)

    def _folders(self, commit: str) -> None:
        wanted: set[str] = set()
        if commit != EMPTY_TREE:
            body = self._git("cat-file", "commit", commit).split(b"\n\n", 1)[-1]
            with contextlib.suppress(ValueError, AttributeError):
                wanted = set(json.loads(body.decode()).get("empty_dirs", []))
        for rel in sorted(wanted):
            _mkdirs_beneath(self.workspace, rel)
        _remove_other_empty_dirs(self.workspace, {os.fsencode(w) for w in wanted})

    def copy_objects_to(self, other: GitRepo, commits: list[str]) -> None:
        """Hard-link (or copy) every object the commits hold into ``other`` (a fork)."""
        other.init()
        commits = [c for c in commits if c != EMPTY_TREE]
        if not commits:
            return
        out = self._git("rev-list", "--objects", "--no-object-names", *commits)
        src, dst = os.fsencode(self.git_dir / "objects"), os.fsencode(other.git_dir / "objects")
        made: set[bytes] = set()
        for sha in out.split():
            folder = sha[:2]
            if folder not in made:
                os.makedirs(os.path.join(dst, folder), exist_ok=True)
                made.add(folder)
            rel = os.path.join(folder, sha[2:])
            try:
                os.link(os.path.join(src, rel), os.path.join(dst, rel))
            except FileExistsError:
                continue
            except OSError:  # another file system: a copy
                shutil.copy2(os.path.join(src, rel), os.path.join(dst, rel))

    def remove(self) -> None:
        shutil.rmtree(self.git_dir, ignore_errors=True)


def _z(paths: Iterable[bytes]) -> bytes:
    return b"".join(p + b"\0" for p in paths)


def walk(root: Path) -> tuple[set[bytes], set[bytes]]:
    """(files and links, empty folders) under ``root``, relative, as bytes; never entering
    a link; ``.git`` entries and special files left out."""
    files: set[bytes] = set()
    empty: set[bytes] = set()
    top = os.fsencode(root)
    stack: list[bytes] = [b""]
    while stack:
        rel = stack.pop()
        try:
            entries = list(os.scandir(os.path.join(top, rel) if rel else top))
        except (FileNotFoundError, NotADirectoryError, PermissionError):
            continue
        if not entries and rel:
            empty.add(rel)
        for entry in entries:
            name = entry.name
            if name == b".git":
                continue
            path = rel + b"/" + name if rel else name
            try:
                mode = entry.stat(follow_symlinks=False).st_mode
            except OSError:
                continue
            if stat.S_ISDIR(mode):
                stack.append(path)
            elif stat.S_ISREG(mode) or stat.S_ISLNK(mode):
                files.add(path)
    return files, empty


def _mkdirs_beneath(root: Path, rel: str) -> None:
    """Make the folder ``rel`` under ``root`` one level at a time, never through a link."""
    current = root
    for part in Path(rel).parts:
        if part in ("", ".", ".."):
            return
        current = current / part
        try:
            st = os.lstat(current)
        except FileNotFoundError:
            os.mkdir(current)
            continue
        if not stat.S_ISDIR(st.st_mode):
            return


def _remove_other_empty_dirs(root: Path, keep: set[bytes]) -> None:
    """Remove empty folders the checkpoint did not have (deepest first; ``.git`` left)."""
    top = os.fsencode(root)
    found: list[bytes] = []
    for dirpath, dirnames, _files in os.walk(top):
        dirnames[:] = [d for d in dirnames if d != b".git"]
        if dirpath != top:
            found.append(dirpath)
    for dirpath in reversed(found):
        if os.path.relpath(dirpath, top) in keep:
            continue
        try:
            if not os.listdir(dirpath):
                os.rmdir(dirpath)
        except OSError:
            pass
