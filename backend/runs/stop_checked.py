"""The run's view of its runtime: every operation first checks the run's stop flag."""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from backend.runtime.base import Runtime, operation_names

if TYPE_CHECKING:
    from backend.agent.control import RunControl


class StopCheckedRuntime:
    """Wraps the shared runtime for one run: every operation of
    :class:`~backend.runtime.base.RuntimeOperations` raises RunStopped when a stop was
    requested, before the action starts (the pipeline closes the action's message). Anything
    else (its name, its life cycle) is the inner runtime's, as it is: a new operation is
    declared in backend/runtime/base.py only, never here."""

    def __init__(self, inner: Runtime, control: RunControl) -> None:
        self.inner = inner
        self.control = control
        self.operations = operation_names()

    def __getattr__(self, name: str) -> Any:
        value = getattr(self.inner, name)
        if name not in self.operations:
            return value
        checked = self._checked(value)
        setattr(self, name, checked)  # made once: found as an attribute from now on
        return checked

    def _checked(self, operation: Callable[..., Awaitable[Any]]) -> Callable[..., Awaitable[Any]]:
        @functools.wraps(operation)
        async def checked(*args: Any, **kwargs: Any) -> Any:
            self.control.check_stop()
            return await operation(*args, **kwargs)

        return checked
