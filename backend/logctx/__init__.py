"""Who and what a log line is about: the run, conversation and user in context (set where
a request is handled and where a run executes), written as fields by ``LOG_FORMAT=json``
(one JSON object a line, uvicorn's lines included); the text format stays the default."""

from backend.logctx.context import LogContext, bind, current
from backend.logctx.json_format import JsonFormatter, trace_id

__all__ = ["JsonFormatter", "LogContext", "bind", "current", "trace_id"]
