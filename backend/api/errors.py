"""JSON errors: {"error": {"code", "message"}} with a 4xx status."""

from __future__ import annotations

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

CODES = {
    400: "invalid_request",
    401: "unauthorized",
    403: "forbidden",
    404: "not_found",
    405: "method_not_allowed",
    408: "timeout",
    409: "conflict",
    413: "too_large",
    414: "too_large",
    415: "unsupported_media_type",
    431: "too_large",
    503: "unavailable",
}


class ApiError(Exception):
    def __init__(self, status: int, message: str, code: str | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.code = code or CODES.get(status, "error")


def error_response(status: int, message: str, code: str | None = None) -> JSONResponse:
    return JSONResponse(
        {"error": {"code": code or CODES.get(status, "error"), "message": message}},
        status_code=status,
    )


async def api_error_handler(_request: Request, exc: Exception) -> Response:
    assert isinstance(exc, ApiError)
    return error_response(exc.status, exc.message, exc.code)


async def http_error_handler(_request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    message = exc.detail if isinstance(exc.detail, str) else "error"
    if exc.status_code == 404:
        message = "Not found."
    return error_response(exc.status_code, message)
