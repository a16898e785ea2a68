"""Who is calling. The LemonAI client sends `Authorization: Bearer <localStorage
access_token>` on its calls (`Bearer null` when signed out) and only a `node-token` header
on its run stream. Without AUTH_TOKEN every call is the single local user, whatever it
sends; with AUTH_TOKEN either header must carry a configured token."""

from __future__ import annotations

from starlette.types import ASGIApp, Receive, Scope, Send

from backend.api.auth import DEFAULT_USER, user_for_token
from backend.lemonai.envelope import fail
from backend.lemonai.services import Services

STATE_KEY = "lemon_user"


class LemonAuth:
    def __init__(self, app: ASGIApp, services: Services) -> None:
        self.app = app
        self.services = services

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        tokens = self.services.user_tokens()
        user = DEFAULT_USER if not tokens else _user(scope, tokens)
        if user is None:
            response = fail(
                401,
                "Missing or wrong token: put the planact AUTH_TOKEN in localStorage "
                "'access_token' and 'node_token'.",
            )
            response.headers["WWW-Authenticate"] = "Bearer"
            await response(scope, receive, send)
            return
        scope.setdefault("state", {})[STATE_KEY] = user
        await self.app(scope, receive, send)


def _user(scope: Scope, tokens: dict[str, str]) -> str | None:
    candidates: list[str] = []
    for name, value in scope.get("headers", []):
        text = value.decode("latin-1").strip()
        if name == b"authorization" and text[:7].lower() == "bearer ":
            candidates.append(text[7:].strip())
        elif name == b"node-token":
            candidates.append(text)
    for token in candidates:
        user = user_for_token(tokens, token)
        if user is not None:
            return user
    return None
