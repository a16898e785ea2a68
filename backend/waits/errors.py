"""The typed errors of answering a wait; the API maps them to 404, 409 and 400."""

from __future__ import annotations


class WaitError(Exception):
    """An answer that changes nothing; ``status``: the HTTP status it maps to."""

    status = 400


class WaitNotFound(WaitError):
    """No such run (or another user's), or no such approval or question in it."""

    status = 404


class WaitConflict(WaitError):
    """The approval or question is no longer pending (answered, timed out, stopped)."""

    status = 409


class BadAnswer(WaitError):
    """A decision other than approve / reject / approve_all, a reason or answer too long."""

    status = 400
