"""How the owning process steers a run it executes: stop, shut down, lost, ending.

Process-local flags, not progress (that is ``RunState``): set by the owner (backend/runs),
checked before every model call and every action."""

from __future__ import annotations

from dataclasses import dataclass


class RunStopped(BaseException):
    """A stop was requested: raised by ``RunControl.check_stop`` before a model call or an
    action. A BaseException so that no ``except Exception`` on the way swallows it."""


@dataclass
class RunControl:
    run_id: str
    # a stop was requested (by a person, from any process)
    stop_requested: bool = False
    # this process shuts down (past SHUTDOWN_GRACE)
    shutting_down: bool = False
    # the run publishes its end: no more cancelling, no more stop checks
    ending: bool = False
    # another process failed this run (its owner's lease expired): nothing more is published
    lost: bool = False

    def check_stop(self) -> None:
        if (self.stop_requested or self.shutting_down or self.lost) and not self.ending:
            raise RunStopped(self.run_id)
