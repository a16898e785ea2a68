"""What one conversation's commands may use while they run (docs/security.md).

- :class:`SandboxLimits`: the caps read from the settings (``SANDBOX_MEMORY_MB``,
  ``SANDBOX_PIDS``, ``SANDBOX_CPUS``, ``SANDBOX_TMP_MB``, ``WORKSPACE_MAX_MB``), the same
  numbers for both sandboxed runtimes;
- :mod:`.budget`: the workspace budget watched while a command runs (both runtimes);
- :mod:`.cgroups`: the local runtime's per-conversation control groups (memory, processes,
  CPU) where the machine lets the server make them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from backend.config import Settings

MB = 1024 * 1024
TMP_MAX = 256 * MB  # the private /tmp's default size: at most this...
TMP_SHARE = 4  # ...and at most a quarter of the memory cap
_UNITS = {"": 1, "b": 1, "k": 1024, "m": MB, "g": 1024 * MB, "t": 1024 * 1024 * MB}


def parse_size(text: str) -> int:
    """Bytes of a docker-style size ("512m", "1g", "1048576")."""
    found = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([bkmgt]?)b?\s*", text.lower())
    if found is None:
        raise ValueError(f"not a size: {text!r} (a number, optionally k, m or g)")
    return int(float(found[1]) * _UNITS[found[2]])


def _setting(name: str, value: str) -> int:
    try:
        return parse_size(value)
    except ValueError as exc:
        raise ValueError(f"{name}={value!r} is not a size: write e.g. 512m or 1g") from exc


@dataclass(frozen=True)
class SandboxLimits:
    """Caps of one conversation's sandbox, in bytes where sizes."""

    memory: int = 1024 * MB
    pids: int = 256
    cpus: float = 1.0
    tmp: int = TMP_MAX
    workspace: int = 1024 * MB  # no single file may grow past it (RLIMIT_FSIZE)

    @classmethod
    def from_settings(cls, settings: Settings) -> SandboxLimits:
        """The limits of these settings; ValueError naming the setting that is no size."""
        if settings.sandbox_memory_mb:
            memory = settings.sandbox_memory_mb * MB
        else:
            memory = _setting("SANDBOX_MEMORY", settings.sandbox_memory)
        if settings.sandbox_tmp_mb:
            tmp = settings.sandbox_tmp_mb * MB
        elif settings.sandbox_tmp_size:
            tmp = _setting("SANDBOX_TMP_SIZE", settings.sandbox_tmp_size)
        else:
            tmp = min(TMP_MAX, memory // TMP_SHARE)
        return cls(
            memory=memory,
            pids=settings.sandbox_pids,
            cpus=settings.sandbox_cpus,
            tmp=tmp,
            workspace=int(settings.workspace_max_mb * MB),
        )

    @property
    def memory_words(self) -> str:
        return f"{self.memory / MB:g} MB"
