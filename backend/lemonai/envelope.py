"""LemonAI's answer envelope `{code, data, msg}`: `code` 0 on success; on error the HTTP
status (4xx) is both the response status and `code`, `data` is null, `msg` says why."""

from __future__ import annotations

from typing import Any

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response


class LemonError(Exception):
    def __init__(self, status: int, msg: str) -> None:
        super().__init__(msg)
        self.status = status
        self.msg = msg


def ok(data: Any, msg: str = "ok") -> JSONResponse:
    return JSONResponse({"code": 0, "data": data, "msg": msg})


def fail(status: int, msg: str) -> JSONResponse:
    return JSONResponse({"code": status, "data": None, "msg": msg}, status_code=status)


async def lemon_error_handler(_request: Request, exc: Exception) -> Response:
    assert isinstance(exc, LemonError)
    return fail(exc.status, exc.msg)


async def http_error_handler(_request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    msg = exc.detail if isinstance(exc.detail, str) else "error"
    return fail(exc.status_code, "Not found." if exc.status_code == 404 else msg)
