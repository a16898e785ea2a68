"""The HTTP edge under held connections, against the real `planact serve`.

  uv run python bench/bench_edge.py

Prints /api/health latency (median and p95 of 100 requests) idle and while 1,000
half-open connections are held, their ratio, and how long the server takes to close the
half-open ones after HTTP_HEADER_TIMEOUT.
"""

from __future__ import annotations

import os
import resource
import selectors
import socket
import statistics
import sys
import tempfile
import time
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from tests.e2e.server import Server, server_env
from tests.fakellm import FakeModelServer

HALF_OPEN = 1000
HEADER_TIMEOUT = 5.0


def health_ms(client: httpx.Client, n: int = 100) -> tuple[float, float]:
    times = []
    for _ in range(n):
        t = time.perf_counter()
        assert client.get("/api/health").status_code == 200
        times.append((time.perf_counter() - t) * 1000)
    times.sort()
    return statistics.median(times), times[int(n * 0.95) - 1]


def main() -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, HALF_OPEN + 500), hard))
    tmp = Path(tempfile.mkdtemp(prefix="planact-bench-edge-"))
    model = FakeModelServer(auto=True).start()
    env = server_env(tmp, model.base_url, HTTP_HEADER_TIMEOUT=str(HEADER_TIMEOUT))
    server = Server(tmp, env).start()
    socks: list[socket.socket] = []
    try:
        with httpx.Client(base_url=server.url, timeout=10) as client:
            idle = health_ms(client)
            head = f"GET /api/health HTTP/1.1\r\nHost: 127.0.0.1:{server.port}\r\n".encode()
            opened = time.monotonic()
            for _ in range(HALF_OPEN):
                s = socket.create_connection(("127.0.0.1", server.port))
                s.sendall(head)
                socks.append(s)
            loaded = health_ms(client)
        with selectors.DefaultSelector() as sel:
            for s in socks:
                s.setblocking(False)
                sel.register(s, selectors.EVENT_READ)
            left = len(socks)
            while left and time.monotonic() - opened < HEADER_TIMEOUT + 60:
                for key, _ in sel.select(timeout=1):
                    sock = key.fileobj
                    assert isinstance(sock, socket.socket)
                    try:
                        data = sock.recv(65536)
                    except ConnectionResetError:
                        data = b""
                    if not data or data.startswith(b"HTTP/1.1 408"):
                        sel.unregister(sock)
                        left -= 1
            closed_after = time.monotonic() - opened
        print(f"health idle:            median {idle[0]:.2f} ms, p95 {idle[1]:.2f} ms")
        print(
            f"health, {HALF_OPEN} half-open: median {loaded[0]:.2f} ms, p95 {loaded[1]:.2f} ms "
            f"(x{loaded[0] / idle[0]:.2f} of idle)"
        )
        print(
            f"half-open closed by the server: {HALF_OPEN - left}/{HALF_OPEN} within "
            f"{closed_after:.1f} s of opening (HTTP_HEADER_TIMEOUT={HEADER_TIMEOUT:g})"
        )
    finally:
        for s in socks:
            s.close()
        server.stop()
        model.stop()
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


if __name__ == "__main__":
    main()
