"""A real `planact run` on a pseudo-terminal: its stdin, stdout and stderr are the terminal,
which is its controlling terminal (Ctrl-C and Ctrl-D work as a person's keys do)."""

from __future__ import annotations

import fcntl
import os
import signal
import subprocess
import termios
import threading
from pathlib import Path

from tests.e2e.server import PLANACT

CTRL_C = b"\x03"
CTRL_D = b"\x04"


def _take_terminal() -> None:
    """In the child, after setsid: stdin's terminal becomes the controlling terminal."""
    fcntl.ioctl(0, termios.TIOCSCTTY, 0)


class TerminalSession:
    def __init__(
        self, args: list[str], cwd: Path, env: dict[str, str], stdout: Path | None = None
    ) -> None:
        """``stdout``: a file the run's stdout goes to instead of the terminal."""
        master, slave = os.openpty()
        self.master = master
        out = stdout.open("wb") if stdout is not None else None
        self.proc = subprocess.Popen(
            [PLANACT, "run", *args],
            cwd=cwd,
            env={**env, "TERM": "dumb", "COLUMNS": "200"},
            stdin=slave,
            stdout=out or slave,
            stderr=slave,
            start_new_session=True,
            preexec_fn=_take_terminal,
        )
        os.close(slave)
        if out is not None:
            out.close()
        self._out = b""
        self._changed = threading.Condition()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        while True:
            try:
                chunk = os.read(self.master, 4096)
            except OSError:  # EIO: the child closed the terminal
                chunk = b""
            with self._changed:
                if not chunk:
                    self._closed = True
                    self._changed.notify_all()
                    return
                self._out += chunk
                self._changed.notify_all()

    _closed = False

    @property
    def output(self) -> str:
        with self._changed:
            return self._text()

    def expect(self, text: str, timeout: float = 60, after: int = 0) -> int:
        """Wait until ``text`` was printed (past position ``after`` of :attr:`output`); the
        position just after it. Fails with everything printed so far."""
        with self._changed:
            self._changed.wait_for(lambda: self._closed or text in self._text()[after:], timeout)
            out = self._text()
        at = out.find(text, after)
        assert at >= 0, f"{text!r} not printed; output so far:\n{out}"
        return at + len(text)

    def _text(self) -> str:
        return self._out.decode("utf-8", errors="replace").replace("\r\n", "\n")

    @property
    def hung_up(self) -> bool:
        """Every process that had the terminal open has closed it (or ended)."""
        with self._changed:
            return self._closed

    def count(self, text: str) -> int:
        return self.output.count(text)

    def type(self, data: bytes | str) -> None:
        os.write(self.master, data.encode() if isinstance(data, str) else data)

    def wait(self, timeout: float = 60) -> int:
        code = self.proc.wait(timeout)
        with self._changed:
            self._changed.wait_for(lambda: self._closed, 10)
        return code

    def close(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(10)
        self._reader.join(10)
        os.close(self.master)
