"""The end of a run that did not complete: one ``close_run`` for the pipeline (a stop, an
error, a shutdown) and for recovery (a run whose owner died, a queued run stopped)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable

from backend.messages.kinds import MessageKind
from backend.messages.message import Message
from backend.messages.tasks import PlanTask

Publish = Callable[[Message], Awaitable[Message]]

STOPPED = "The run was stopped."
STOPPED_ACTION = "Stopped before it finished."


async def close_run(
    publish: Publish,
    fail_task: Callable[[PlanTask, str], Awaitable[None]],
    *,
    stopped: bool,
    reason: str,
    open_actions: Iterable[Message],
    open_tasks: Iterable[PlanTask],
    summary: Callable[[], Awaitable[None]],
    closing: str = "Interrupted.",
    output: Callable[[str, str], str] | None = None,
) -> None:
    """Give every `running` action message its final partner (``open_actions``, innermost
    first; ``output(uuid, text)`` adds what a command printed), fail ``open_tasks`` with
    ``fail_task(task, result)``, publish `stop` or `error` (``reason``, said once), then
    the summary (``summary()`` publishes `finish_summery`: a failed or stopped run still
    offers the files it made). ``closing`` is a failed action's text."""
    text = STOPPED_ACTION if stopped else closing
    for running in open_actions:
        uid = running.uuid
        await publish(
            Message.build(
                running.meta.action_type,
                output(uid, text) if output is not None else text,
                status="failure",
                task_id=running.meta.task_id,
                filepath=running.meta.filepath,
                uuid=uid,
                meta_content=running.meta.content,
            )
        )
    for task in open_tasks:
        await fail_task(task, "stopped" if stopped else reason)
    if stopped:
        await publish(Message.build(MessageKind.STOP, STOPPED, status="failure"))
    else:
        await publish(Message.build(MessageKind.ERROR, reason, status="failure"))
    await summary()
