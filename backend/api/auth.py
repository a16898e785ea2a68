"""AUTH_TOKEN: every /api route but /api/health needs `Authorization: Bearer <token>`
(or `?access_token=` on GET only: links and EventSource cannot send a header; a token in
a URL ends up in logs and history, so nothing that changes state takes it)."""

from __future__ import annotations

import hmac
from urllib.parse import parse_qs

from starlette.types import ASGIApp, Receive, Scope, Send

from backend.api.errors import error_response

OPEN_PATHS = {"/api/health"}
# operating it: readiness, the OpenAPI document and its page need no token
OPEN_PATHS |= {"/api/ready", "/api/openapi.json", "/api/docs", "/api/docs/init.js"}
OPEN_PREFIXES = ("/api/docs/assets/",)
# a shared conversation's read-only view (backend/api/shared.py): its GET routes only
SHARED_PREFIX = "/api/shared/"
QUERY_TOKEN_METHODS = {"GET", "HEAD"}
DEFAULT_USER = "1"


class AuthMiddleware:
    def __init__(self, app: ASGIApp, tokens: dict[str, str]) -> None:
        self.app = app
        self.tokens = tokens

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        path: str = scope["path"]
        state = scope.setdefault("state", {})
        if not self.tokens:
            state["user_id"] = DEFAULT_USER
            await self.app(scope, receive, send)
            return
        shared = path.startswith(SHARED_PREFIX) and scope.get("method") in QUERY_TOKEN_METHODS
        if (
            not path.startswith("/api/")
            or path in OPEN_PATHS
            or path.startswith(OPEN_PREFIXES)
            or shared
        ):
            await self.app(scope, receive, send)
            return
        user = self._user(scope)
        if user is None:
            response = error_response(
                401,
                "Missing or wrong token: send 'Authorization: Bearer <AUTH_TOKEN>' "
                "(?access_token= is accepted on GET only).",
            )
            response.headers["WWW-Authenticate"] = "Bearer"
            await response(scope, receive, send)
            return
        state["user_id"] = user
        await self.app(scope, receive, send)

    def _user(self, scope: Scope) -> str | None:
        token = ""
        for name, value in scope.get("headers", []):
            if name == b"authorization":
                text = value.decode("latin-1")
                if text[:7].lower() == "bearer ":
                    token = text[7:].strip()
                break
        if not token and scope.get("method") in QUERY_TOKEN_METHODS:
            query = parse_qs(scope.get("query_string", b"").decode("latin-1"))
            token = (query.get("access_token") or [""])[0]
        return user_for_token(self.tokens, token)


def user_for_token(tokens: dict[str, str], token: str) -> str | None:
    """The user whose token this is (compared in constant time), or None."""
    if not token:
        return None
    for known, user in tokens.items():
        if hmac.compare_digest(known.encode(), token.encode()):
            return user
    return None
