"""Logging set-up for `planact serve` and `planact run`: our lines, not the libraries', and
never a secret a URL carried (``?access_token=`` of links and EventSource)."""

from __future__ import annotations

import copy
import logging
import os
import re
from typing import Any
from urllib.parse import unquote_plus

from backend.logctx import JsonFormatter

# libraries whose INFO lines repeat what we log ourselves (litellm logs each call several
# times, Alembic each migration step, httpx each request)
NOISY = (
    "LiteLLM",
    "LiteLLM Router",
    "LiteLLM Proxy",
    "litellm",
    "httpx",
    "httpcore",
    "alembic",
    "docker",
    "urllib3",
)


# a query parameter's name as it stands in a URL (percent-encoded or not), up to its "="
QUERY_NAME = re.compile(r"[?&;]([^=&;#?\s\"']*)=")
# a name that carries a credential once decoded: ?access_token=, &node_token=, ?api_key= …
SECRET_NAME = re.compile(
    r".*(?:token|api[_-]?key|key|password|passwd|secret|signature|sig)", re.IGNORECASE | re.DOTALL
)
# where a value ends: the next parameter (a query splits on "&" only, so ";" stays inside
# the value the server reads) or the end of the URL
VALUE_END = re.compile(r"[&#\s]")
REDACTED = "[redacted]"


def decoded_name(name: str) -> str:
    """``name`` percent- and plus-decoded until it no longer changes (a server decodes it
    once, ``access%5Ftoken`` is ``access_token``; decoding more only redacts more)."""
    for _ in range(8):
        plain = unquote_plus(name)
        if plain == name:
            break
        name = plain
    return name


def redact(text: str) -> str:
    """``text`` with the value of every credential query parameter replaced; the name is
    judged decoded, so any spelling the server decodes to a credential is redacted."""
    if "=" not in text:
        return text
    out: list[str] = []
    pos = 0
    for match in QUERY_NAME.finditer(text):
        if match.start() < pos or not SECRET_NAME.fullmatch(decoded_name(match.group(1))):
            continue
        end = VALUE_END.search(text, match.end())
        out += [text[pos : match.end()], REDACTED]
        pos = end.start() if end else len(text)
    out.append(text[pos:])
    return "".join(out)


def _redact_arg(value: Any) -> Any:
    return redact(value) if isinstance(value, str) else value


class RedactQuerySecrets(logging.Filter):
    """A handler filter: the record's message and arguments without credentials, so that
    every line the handler writes is clean (uvicorn's access line passes the path with its
    query string as an argument)."""

    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.msg, str):
            record.msg = redact(record.msg)
        if isinstance(record.args, tuple):
            record.args = tuple(_redact_arg(a) for a in record.args)
        elif isinstance(record.args, dict):
            record.args = {k: _redact_arg(v) for k, v in record.args.items()}
        return True


READ_METHODS = ("GET", "HEAD", "OPTIONS")


class QuietReads(logging.Filter):
    """uvicorn's access lines: a read that succeeded (health checks, polls, static files)
    is a DEBUG line, written only with LOG_LEVEL=DEBUG; requests that change something or
    fail stay at INFO. uvicorn passes (client, method, path, http version, status)."""

    def filter(self, record: logging.LogRecord) -> bool:
        args = record.args
        if not isinstance(args, tuple) or len(args) != 5:
            return True
        method, status = args[1], args[4]
        if method not in READ_METHODS or not isinstance(status, int) or status >= 400:
            return True
        record.levelno, record.levelname = logging.DEBUG, "DEBUG"
        return logging.getLogger().isEnabledFor(logging.DEBUG)


FORMATS = ("text", "json")


def log_format() -> str:
    """LOG_FORMAT: ``text`` (default) or ``json`` (one JSON object a line, backend/logctx)."""
    value = os.environ.get("LOG_FORMAT", "").strip().lower()
    return value if value in FORMATS else "text"


def uvicorn_log_config() -> dict[str, Any]:
    """uvicorn's own logging set-up (its access and error lines), every handler redacting,
    successful reads logged at DEBUG; JSON lines with LOG_FORMAT=json."""
    from uvicorn.config import LOGGING_CONFIG

    config = copy.deepcopy(LOGGING_CONFIG)
    if log_format() == "json":
        config["formatters"] = {
            name: {"()": JsonFormatter} for name in config.get("formatters", {})
        }
    filters = config.setdefault("filters", {})
    filters["redact_query_secrets"] = {"()": RedactQuerySecrets}
    filters["quiet_reads"] = {"()": QuietReads}
    for name, handler in config.get("handlers", {}).items():
        handler.setdefault("filters", []).append("redact_query_secrets")
        if name == "access":
            handler["filters"].append("quiet_reads")
    return config


def configure_logging(level_name: str | None, *, quiet: bool = False) -> int:
    """Root logging at LOG_LEVEL (default INFO, or WARNING when ``quiet``); library loggers
    at WARNING unless LOG_LEVEL=DEBUG brings them back. Returns the level."""
    name = (level_name or ("WARNING" if quiet else "INFO")).upper()
    level = logging.getLevelName(name)
    if not isinstance(level, int):
        level = logging.INFO
    logging.basicConfig(level=level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    root = logging.getLogger()
    root.setLevel(level)
    for handler in root.handlers:
        if not any(isinstance(f, RedactQuerySecrets) for f in handler.filters):
            handler.addFilter(RedactQuerySecrets())
        if log_format() == "json":
            handler.setFormatter(JsonFormatter())
    raw = os.environ.get("LOG_FORMAT", "").strip()
    if raw and raw.lower() not in FORMATS:
        logging.getLogger(__name__).warning(
            "LOG_FORMAT=%r is neither text nor json: writing text", raw[:40]
        )
    lib_level = logging.DEBUG if level <= logging.DEBUG else logging.WARNING
    for lib in NOISY:
        logging.getLogger(lib).setLevel(lib_level)
    return level
