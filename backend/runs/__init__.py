"""The run lifecycle: start, lease, stop, recover; the executor and notifier seams."""

from backend.runs.manager import RunManager, ShuttingDown

__all__ = ["RunManager", "ShuttingDown"]
