"""The short exception family that steers a run."""


class RunError(Exception):
    """The run cannot go on. The message is shown to the user."""


class TaskFailed(RunError):
    """A task ended without finishing."""


class LimitExceeded(TaskFailed):
    """A task used up its model turns or its format-error allowance."""


class StuckLoop(LimitExceeded):
    """A task repeated the same action with the same result several turns in a row."""
