"""Logging set-up for `planact serve` and `planact run`: our lines, not the libraries'."""

from __future__ import annotations

import logging

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


def configure_logging(level_name: str | None, *, quiet: bool = False) -> int:
    """Root logging at LOG_LEVEL (default INFO, or WARNING when ``quiet``); library loggers
    at WARNING unless LOG_LEVEL=DEBUG brings them back. Returns the level."""
    name = (level_name or ("WARNING" if quiet else "INFO")).upper()
    level = logging.getLevelName(name)
    if not isinstance(level, int):
        level = logging.INFO
    logging.basicConfig(level=level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logging.getLogger().setLevel(level)
    lib_level = logging.DEBUG if level <= logging.DEBUG else logging.WARNING
    for lib in NOISY:
        logging.getLogger(lib).setLevel(lib_level)
    return level
