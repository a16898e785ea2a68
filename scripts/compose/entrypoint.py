"""Entrypoint of the planact app image.

Started as root, it prepares what the app user needs and then runs the command (default
`planact serve`) as that user, never as root:

1. the data folder (SQLite) and WORKSPACE_DIR exist and belong to the app user: PUID/PGID
   when set, else the owner of WORKSPACE_DIR when that is not root (a host folder mounted
   there keeps its owner), else planact (10001; a bind mount the engine created is root's);
2. when the Docker socket is mounted, the app user gets the socket's group, so that the
   docker runtime can start sandbox containers;
3. when SANDBOX_HOST_WORKSPACE_DIR is unset and the socket answers, it is found by asking
   the engine which host path (bind mount or named volume) backs WORKSPACE_DIR in this
   container: sandbox containers are siblings started by the host's engine, so their bind
   mounts need host paths.

Started as another user (`docker run --user ...`), it only does 3 and runs the command.
"""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

SOCKET = "/var/run/docker.sock"
APP_UID = 10001  # the image's planact user and group


def say(msg: str) -> None:
    print(f"entrypoint: {msg}", file=sys.stderr, flush=True)


def sqlite_dir(url: str) -> Path | None:
    if not url.startswith("sqlite:///"):
        return None
    path = url[len("sqlite:///") :].split("?", 1)[0]
    return Path(path).parent if path and path != ":memory:" else None


def own(path: Path, uid: int, gid: int) -> None:
    path.mkdir(parents=True, exist_ok=True)
    st = path.stat()
    if (st.st_uid, st.st_gid) != (uid, gid):
        say(f"giving {path} to {uid}:{gid}")
        for root, dirs, files in os.walk(path):
            for name in [*dirs, *files]:
                os.lchown(os.path.join(root, name), uid, gid)
        os.chown(path, uid, gid)


def own_container_id() -> str | None:
    """This container's id, from the engine-managed files mounted into it."""
    try:
        text = Path("/proc/self/mountinfo").read_text()
    except OSError:
        text = ""
    m = re.search(r"/containers/([0-9a-f]{64})/(?:hostname|hosts|resolv\.conf)", text)
    return m.group(1) if m else os.environ.get("HOSTNAME")


def host_workspace_dir(workspace: Path) -> str | None:
    """The host path of ``workspace`` according to this container's mounts."""
    try:
        import docker  # the app's dependency, in the image's virtualenv
    except ImportError:
        return None
    cid = own_container_id()
    if not cid:
        return None
    try:
        client = docker.DockerClient(base_url=f"unix://{SOCKET}", timeout=10)
        mounts = client.api.inspect_container(cid).get("Mounts", [])
    except Exception as exc:  # the engine is optional: the local runtime needs none
        say(f"could not inspect this container through {SOCKET}: {exc}")
        return None
    best: tuple[int, str] | None = None
    for mount in mounts:
        dest, src = Path(mount.get("Destination", "")), mount.get("Source", "")
        if not src or not dest.is_absolute():
            continue
        if workspace == dest or dest in workspace.parents:
            depth = len(dest.parts)
            if best is None or depth > best[0]:
                best = (depth, str(Path(src) / workspace.relative_to(dest)))
    return best[1] if best else None


def main() -> None:
    argv = sys.argv[1:] or ["planact", "serve"]
    workspace = Path(os.environ.get("WORKSPACE_DIR", "./workspace")).resolve()
    data = sqlite_dir(os.environ.get("DATABASE_URL", "sqlite:///./data/planact.db"))
    socket_gid = os.stat(SOCKET).st_gid if os.path.exists(SOCKET) else None

    can_ask = socket_gid is not None and (os.getuid() == 0 or os.access(SOCKET, os.W_OK))
    if can_ask and not os.environ.get("SANDBOX_HOST_WORKSPACE_DIR"):
        found = host_workspace_dir(workspace)
        if found:
            os.environ["SANDBOX_HOST_WORKSPACE_DIR"] = found
            say(f"SANDBOX_HOST_WORKSPACE_DIR={found} (host path of {workspace})")
        else:
            say(
                f"no mount backs {workspace}: sandboxes of the docker runtime cannot see "
                "the workspace; mount a volume there or set SANDBOX_HOST_WORKSPACE_DIR"
            )

    if os.getuid() != 0:
        os.execvp(argv[0], argv)

    owner = workspace.stat() if workspace.is_dir() else None
    if owner is not None and owner.st_uid != 0:
        default_uid, default_gid = owner.st_uid, owner.st_gid
    else:
        default_uid, default_gid = APP_UID, APP_UID
    puid, pgid = os.environ.get("PUID"), os.environ.get("PGID")
    uid = int(puid) if puid else default_uid
    gid = int(pgid) if pgid else (uid if puid else default_gid)
    for path in (workspace, data):
        if path is not None:
            own(path.resolve(), uid, gid)
    groups = [gid]
    if socket_gid is not None and socket_gid != gid:
        groups.append(socket_gid)
    os.setgroups(groups)
    os.setgid(gid)
    os.setuid(uid)
    if os.environ.get("HOME", "/root") == "/root":
        os.environ["HOME"] = "/tmp"
    os.execvp(argv[0], argv)


if __name__ == "__main__":
    main()
