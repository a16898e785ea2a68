"""web_fetch's settings (WEB_FETCH, WEB_TIMEOUT, WEB_MAX_BYTES, WEB_RENDER, WEB_ALLOW_HOSTS)."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from backend.tools.web.policy import parse_allow_hosts


@dataclass(frozen=True)
class FetchConfig:
    enabled: bool = True
    timeout: float = 20.0
    max_bytes: int = 5_000_000
    render: str = "auto"  # auto | never | always
    allow_hosts: frozenset[str] = frozenset()
    chromium_path: str = "/usr/bin/chromium"

    @classmethod
    def from_settings(cls, settings: Any) -> FetchConfig:
        return cls(
            enabled=settings.web_fetch,
            timeout=settings.web_timeout,
            max_bytes=settings.web_max_bytes,
            render=settings.web_render,
            allow_hosts=parse_allow_hosts(settings.web_allow_hosts),
            chromium_path=os.environ.get("CHROMIUM_PATH") or "/usr/bin/chromium",
        )
