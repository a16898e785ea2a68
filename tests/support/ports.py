"""Free loopback ports for the servers a test starts.

The kernel picks a free port (bind to port 0) and the socket is closed, so the port can be
handed out again by a later call: two ports asked for close together (a server's and its
preview origin's) could be the same one, and the second server then fails to bind. So a
port is not handed out again by one process until RECENT others have been (``free_port``
asks the kernel again); after that its first server is long gone, or still holds it, and
then the kernel does not offer it."""

from __future__ import annotations

import socket
import threading
from collections import deque

RECENT = 4096  # a suite asks for a few thousand; the kernel's range holds ~28,000
_recent: deque[int] = deque(maxlen=RECENT)  # the oldest leaves as a new one comes in
_lock = threading.Lock()


def free_port() -> int:
    """A loopback port free now and not among the last RECENT this process handed out."""
    with _lock:
        while True:
            with socket.socket() as s:
                s.bind(("127.0.0.1", 0))
                port = int(s.getsockname()[1])
            if port not in _recent:
                _recent.append(port)
                return port


def free_port_pair() -> int:
    """A port free now whose next one is free too (a server's own and, by default, its
    preview listener's: PORT+1); neither among the last RECENT handed out."""
    with _lock:
        while True:
            with socket.socket() as s:
                s.bind(("127.0.0.1", 0))
                port = int(s.getsockname()[1])
            if port in _recent or port + 1 in _recent or port + 1 > 65535:
                continue
            try:
                with socket.socket() as s:
                    s.bind(("127.0.0.1", port + 1))
            except OSError:
                continue
            _recent.extend((port, port + 1))
            return port
