"""The `planact` command: serve, worker, run and the rest (backend/cli/main.py), with the
run's live lines (words.py), its waits at the terminal (waits.py) and its files (files.py)."""

from backend.cli.main import main

__all__ = ["main"]
