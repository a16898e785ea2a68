"""What runs inside a sandbox, as files of this package read once at import.

- ``sandbox_runner.py``: the long-lived command runner (``python3 -c``), one per sandbox;
- ``wrapper.sh``: one command per ``docker exec`` for images without python3;
- ``killer.sh``: kills a ``wrapper.sh`` command (a stop, or the server's deadline);
- ``sweeper.sh``: kills what the sandbox user left running (the exec path's clean-up);
- ``service_stop.py``: stops one preview service (its session and its descendants).

Each file says how it is called. They are passed to the interpreter as text (``-c``), so the
image needs nothing of ours.
"""

from __future__ import annotations

from importlib import resources


def read(name: str) -> str:
    return resources.files(__name__).joinpath(name).read_text(encoding="utf-8")


RUNNER = read("sandbox_runner.py")
WRAPPER = read("wrapper.sh")
KILLER = read("killer.sh")
SWEEPER = read("sweeper.sh")
SERVICE_STOP = read("service_stop.py")
