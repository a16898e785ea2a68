"""The docker runtime: one locked-down container per conversation workspace.

Modules, by concern:

- ``runtime``: :class:`DockerRuntime`, the Runtime seam (lifecycle, hooks, one command);
- ``engine``: the docker client and what the engine's errors mean;
- ``containers``: how a sandbox container is made, named, labelled, found and removed;
- ``sandboxes``: the sandboxes of a runtime (start on first use, replace, forget, close)
  and the idle reaper;
- ``ownership``: the uid/gid commands run as, the workspace's path on the Docker host;
- ``runner``: commands through a sandbox's long-lived command runner;
- ``execs``: commands as one ``docker exec`` each (images without python3);
- ``scripts/``: what runs inside the sandbox (the runner, the exec wrapper, kill and sweep).
"""

from backend.runtime.docker.containers import LABEL_OWNER, LABEL_WORKSPACE
from backend.runtime.docker.engine import MIN_API_VERSION
from backend.runtime.docker.runtime import DockerRuntime

__all__ = ["LABEL_OWNER", "LABEL_WORKSPACE", "MIN_API_VERSION", "DockerRuntime"]
