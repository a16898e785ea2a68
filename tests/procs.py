"""Whether a process still lives, for tests that check what a command left behind."""

from __future__ import annotations


def alive(pid: int) -> bool:
    """True while ``pid`` exists and is not a zombie (a zombie is dead for our purposes).
    A process that vanishes between opening and reading its /proc entry is gone too."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (FileNotFoundError, ProcessLookupError):
        return False
