"""Readiness (GET /api/ready): is this process able to take work now? The database answers,
its schema is at the newest migration, and the default runtime can run a command (the
Docker engine answers and has the image; bubblewrap runs a trivial sandboxed command; an
unsandboxed local runtime needs nothing). Each check is bounded in time; a check that does
not answer in time has failed."""

from __future__ import annotations

from dataclasses import dataclass

import anyio
from sqlalchemy import Engine, text
from sqlalchemy.exc import SQLAlchemyError

from backend.runtime.base import Runtime
from backend.store.db import current_revision, head_revision

CHECK_SECONDS = 5.0


@dataclass(frozen=True)
class Check:
    ok: bool
    detail: str


async def _bounded(what: str, fn: object, *args: object) -> Check:
    """``fn(*args)`` (returning a Check) on a thread, abandoned after CHECK_SECONDS."""
    assert callable(fn)
    with anyio.move_on_after(CHECK_SECONDS):
        found: Check = await anyio.to_thread.run_sync(fn, *args, abandon_on_cancel=True)
        return found
    return Check(False, f"{what} did not answer within {CHECK_SECONDS:g} seconds")


def _ping_database(engine: Engine) -> Check:
    try:
        with engine.connect() as conn:
            conn.execute(text("SELECT 1"))
    except SQLAlchemyError as exc:
        cause = str(getattr(exc, "orig", None) or exc).strip().splitlines()
        return Check(False, f"the database does not answer: {cause[0] if cause else exc}")
    return Check(True, "answers")


def _migrations(engine: Engine) -> Check:
    head, current = head_revision(), current_revision(engine)
    if current is None:
        return Check(False, "the database has no migration applied (run `planact serve`)")
    if current != head:
        return Check(False, f"the database is at migration {current}, not the newest ({head})")
    return Check(True, f"at {head}")


async def check_database(engine: Engine) -> tuple[Check, Check]:
    """(database, migrations); migrations are not read from a database that does not answer."""
    database = await _bounded("the database", _ping_database, engine)
    if not database.ok:
        return database, Check(False, "unknown: the database does not answer")
    return database, await _bounded("the database", _migrations, engine)


async def check_runtime(name: str, runtime: Runtime) -> Check:
    """The default runtime: a local one probes its bubblewrap sandbox (if it has one); any
    other asks its ``available()`` (the Docker engine and the sandbox image)."""
    sandbox = getattr(runtime, "sandbox", None)
    if name == "local" and sandbox is None:
        return Check(True, "local, unsandboxed: nothing to check")
    if sandbox is not None:

        def probe() -> Check:
            why = sandbox.probe()
            if why is None:
                return Check(True, f"{name}: bubblewrap runs a sandboxed command")
            return Check(False, f"{name}: bubblewrap does not work: {why}")

        return await _bounded(f"the {name} runtime's sandbox", probe)
    with anyio.move_on_after(CHECK_SECONDS):
        try:
            ok = await runtime.available()
        except Exception as exc:  # a runtime of a plug-in: any failure is "not usable"
            return Check(False, f"{name}: {type(exc).__name__}: {exc}")
        if ok:
            return Check(True, f"{name}: available")
        note = getattr(runtime, "unavailable_note", "")
        return Check(False, f"the {name} runtime is not usable" + (f": {note}" if note else ""))
    return Check(False, f"the {name} runtime did not answer within {CHECK_SECONDS:g} seconds")
