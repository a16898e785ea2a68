"""How the owning process steers a run it executes: stop, shut down, lost, ending.

Process-local flags, not progress (that is ``RunState``): set by the owner (backend/runs),
checked before every model call and every action."""

from __future__ import annotations

from dataclasses import dataclass


class RunStopped(BaseException):
    """A stop was requested: raised by ``RunControl.check_stop`` before a model call or an
    action. A BaseException so that no ``except Exception`` on the way swallows it."""


class HandedOver(RunStopped):
    """This process shuts down (SIGTERM): the run stops at this step boundary without
    ending; it stays `running` in the store, and a live process takes it over."""


@dataclass
class RunControl:
    run_id: str
    # a stop was requested (by a person, from any process)
    stop_requested: bool = False
    # this process shuts down (past SHUTDOWN_GRACE; a `planact run` only): the run ends
    shutting_down: bool = False
    # this process shuts down (SIGTERM): the run is handed over at its next step boundary
    handing_over: bool = False
    # the run publishes its end: no more cancelling, no more stop checks
    ending: bool = False
    # another process failed this run (its owner's lease expired): nothing more is published
    lost: bool = False

    def check_hand_over(self) -> None:
        """Before a model call (a step boundary): hand the run over if this process goes."""
        if self.handing_over and not (self.stop_requested or self.lost or self.ending):
            raise HandedOver(self.run_id)

    def check_stop(self) -> None:
        if (self.stop_requested or self.shutting_down or self.lost) and not self.ending:
            raise RunStopped(self.run_id)
