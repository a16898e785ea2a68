"""Where a run is (``RunState.stage``, checkpointed) and how its execution in this process
ended (what ``run_pipeline`` and ``RunManager`` return): enumerations, each value the string
it always was (the checkpoints and the logs read the same)."""

from __future__ import annotations

from enum import StrEnum


class Stage(StrEnum):
    """The pipeline's stages, in order; a run resumed elsewhere goes on from its own."""

    START = "start"
    ROUTE = "route"  # the goal is routed: answered directly, or planned
    ANSWERED = "answered"  # answered directly (no plan)
    PLANNED = "planned"
    TASKS = "tasks"
    SUMMARY = "summary"
    ENDING = "ending"  # it ends early (a stop, an error): RunState.outcome says which


class Outcome(StrEnum):
    """How executing a run in this process ended: a final run status, or one of the ways it
    goes on elsewhere (or never ran here)."""

    COMPLETED = "completed"
    FAILED = "failed"
    STOPPED = "stopped"
    PARKED = "parked"  # it waits for a person, in the store only: an answer resumes it
    HANDED_OVER = "handed_over"  # this process shuts down; the run goes on in another one
    TAKEN = "taken"  # another process owns it
    MISSING = "missing"  # no such run (deleted)
