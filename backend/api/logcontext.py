"""A pure ASGI middleware that puts the request's user, and the run and conversation its
answer names (``X-Run-Id``, ``X-Conversation-Id``), into the log context (backend/logctx):
the request's own lines and uvicorn's access line carry them. Placed inside AuthMiddleware,
which finds the user."""

from __future__ import annotations

from collections.abc import Awaitable

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from backend.logctx import bind


class LogContextMiddleware:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        user = scope.get("state", {}).get("user_id")
        bound = bind(user=str(user) if user is not None else None)

        # a plain function handing back the server's awaitable (called in the sender's task,
        # as a coroutine would run): no coroutine of its own for each body message
        def send_naming_the_run(message: Message) -> Awaitable[None]:
            if message["type"] == "http.response.start":
                headers = dict(message.get("headers", []))
                # in this task only: the server writes its access line while sending this
                bind(
                    conversation_id=_text(headers.get(b"x-conversation-id")),
                    run_id=_text(headers.get(b"x-run-id")),
                )
            return send(message)

        try:
            await self.app(scope, receive, send_naming_the_run)
        finally:
            bound.reset()


def _text(value: bytes | None) -> str | None:
    return value.decode("latin-1") if value else None
