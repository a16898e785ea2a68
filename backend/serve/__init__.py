"""Serving the app: uvicorn with our connection limits (protocol.py) and the open-files
limit raised so that many connections cannot starve /api/health."""

from __future__ import annotations

import logging
import resource

from starlette.applications import Starlette

from backend.config import Settings
from backend.logs import uvicorn_log_config
from backend.serve.protocol import EdgeLimits, protocol_class

log = logging.getLogger(__name__)

# files the process needs besides client connections (database, logs, pipes, sandboxes)
FD_RESERVE = 256


def raise_nofile_limit() -> int:
    """Raise the soft RLIMIT_NOFILE to the hard limit; return the soft limit in force."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = hard if hard != resource.RLIM_INFINITY else 1 << 20
    if soft == resource.RLIM_INFINITY or soft >= target:
        return int(soft if soft != resource.RLIM_INFINITY else target)
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
        return int(target)
    except (ValueError, OSError) as exc:
        log.warning("could not raise the open-files limit from %d: %s", soft, exc)
        return int(soft)


def edge_limits(settings: Settings, nofile: int) -> EdgeLimits:
    cap = min(settings.http_max_connections, max(16, nofile - FD_RESERVE))
    if cap < settings.http_max_connections:
        log.warning("HTTP_MAX_CONNECTIONS lowered to %d by the open-files limit (%d)", cap, nofile)
    return EdgeLimits(
        header_timeout=settings.http_header_timeout,
        body_timeout=settings.http_body_timeout,
        write_timeout=settings.http_write_timeout,
        max_connections=cap,
    )


def serve(app: Starlette, settings: Settings) -> None:
    """uvicorn with the edge limits, under the graceful SIGTERM of backend/runs/server.py."""
    from backend.runs.server import serve_gracefully

    limits = edge_limits(settings, raise_nofile_limit())
    serve_gracefully(
        app,
        settings,
        http=protocol_class(limits),
        backlog=max(2048, limits.max_connections),
        log_config=uvicorn_log_config(),  # its access lines without ?access_token=
        # access lines are INFO: above it (LOG_LEVEL=WARNING) uvicorn makes none at all,
        # rather than a record per request that the level then drops
        access_log=logging.getLogger().level <= logging.INFO,
    )
