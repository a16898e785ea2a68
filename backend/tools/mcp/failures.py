"""An MCP server's faults in plain words, without the SDK at import.

The SDK (its pydantic types alone take about half a second) is imported when the first
server is connected (backend/tools/mcp/connection.py); a process with no MCP server
configured never pays for it. These helpers are only called about a connection, so their
own SDK imports cost nothing by then.
"""

from __future__ import annotations

STDERR_LINES = 50  # lines of a stdio server's stderr kept for GET /api/mcp/servers
CLOSED = "the server closed the connection (it exited or stopped answering)"


class StartFailed(Exception):
    """The server did not come up; the message says why in plain words."""

    def __init__(self, message: str, cause: BaseException | None = None) -> None:
        super().__init__(message)
        self.cause = cause  # the exception behind it (a refused connection: it is down)


def leaf(exc: BaseException) -> BaseException:
    """The first leaf of an exception group (the exception itself otherwise)."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


def describe(exc: BaseException, command: str | None = None) -> str:
    """An exception (or the first leaf of an exception group) in plain words; ``command``:
    the stdio server's command, named when it cannot be run."""
    import mcp_types as types
    from mcp.shared.exceptions import MCPError

    exc = leaf(exc)
    if isinstance(exc, MCPError):
        if exc.code == types.CONNECTION_CLOSED:
            return CLOSED
        return exc.message
    if isinstance(exc, FileNotFoundError | PermissionError):
        what = "not found" if isinstance(exc, FileNotFoundError) else "not executable"
        named = command or exc.filename
        reason = exc.strerror or str(exc)
        return f"command {what}: {named} ({reason})" if named else f"command {what}: {reason}"
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def unreachable(exc: BaseException | None) -> bool:
    """The server could not be reached at all (nothing listens, no route): it was down."""
    import httpx2

    return isinstance(exc, httpx2.ConnectError | httpx2.ConnectTimeout)


def timed_out(code: object) -> bool:
    """An MCP error code: the request timed out."""
    import mcp_types as types

    return code == types.REQUEST_TIMEOUT


def connection_closed(code: object) -> bool:
    """An MCP error code: the connection closed under the request."""
    import mcp_types as types

    return code == types.CONNECTION_CLOSED
