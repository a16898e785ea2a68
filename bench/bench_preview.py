"""The preview proxy's cost over a direct connection to the same app, side by side in one run
(interleaved), and the preview action's time to ready against the app's own start time.

    uv run python bench/bench_preview.py [--requests N]

The app (tests/previews/sample_app.py, standard library) runs on the host; its forwarder
(backend/runtime/forwarder.py) beside it; the preview origin (backend/previews/listener.py)
in a process of its own, on uvloop as in `planact serve`; the client (httpx, websockets)
here; and nginx (Debian's package: apt-get install nginx-light) proxying the same app on the
same machine in the same run, configured as docs/deploy.md's (buffering off both ways,
HTTP/1.1 with kept-alive connections to the app). The 10 MB bodies go --big-repeats times each
way, direct, nginx and planact interleaved. Goals: a 10 MB body >= 0.95x nginx's throughput
both ways (one hop each: the hop's cost on this machine is the limit); small GET p50 <= 2 ms
added; WebSocket echo round trip <= 2 ms added; action -> ready <= 1 s above the app's own
start (bubblewrap when it works here, else unsandboxed). Prints figures; asserts nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
import uvloop
from websockets.sync.client import connect

from backend.config import Settings
from backend.previews.host import PreviewHost
from backend.previews.listener import PreviewListener
from backend.runtime import forwarder
from backend.runtime.bwrap import Bubblewrap
from backend.runtime.local import LocalRuntime
from backend.store.repo import Store
from backend.workspace import workspace_path
from tests.support.ports import free_port
from tests.support.previews import seed_ready_service

ROOT = Path(__file__).resolve().parents[1]
APP = ROOT / "tests" / "previews" / "sample_app.py"
BIG = 10_000_000


def wait_listening(port: int, deadline: float = 30.0) -> float:
    start = time.perf_counter()
    while time.perf_counter() - start < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return time.perf_counter() - start
        except OSError:
            time.sleep(0.002)
    raise RuntimeError(f"nothing listens on {port}")


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of a process so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def p50(values: list[float]) -> float:
    return statistics.median(values) * 1000


def serve_origin(database_url: str, port: int) -> None:
    """The preview origin alone (a process of its own, as in `planact serve`)."""

    async def run() -> None:
        settings = Settings(
            _env_file=None, database_url=database_url, preview_url=f"http://127.0.0.1:{port}"
        )
        store = Store(database_url)
        listener = PreviewListener(settings, store)
        assert await listener.start()
        await asyncio.Event().wait()

    # on uvloop, as `planact serve` runs (uvicorn's loop="auto")
    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        runner.run(run())


NGINX_CONF = """
daemon off;
master_process off;
worker_processes 1;
pid {tmp}/nginx.pid;
error_log {tmp}/nginx-error.log warn;
events {{ worker_connections 1024; }}
http {{
    access_log off;
    client_body_temp_path {tmp}/nginx-body;
    proxy_temp_path {tmp}/nginx-proxy;
    fastcgi_temp_path {tmp}/nginx-fastcgi;
    uwsgi_temp_path {tmp}/nginx-uwsgi;
    scgi_temp_path {tmp}/nginx-scgi;
    map $http_upgrade $connection_upgrade {{ default upgrade; '' close; }}
    upstream app {{ server 127.0.0.1:{app}; keepalive 16; }}
    server {{
        listen 127.0.0.1:{port};
        client_max_body_size 0;
        location / {{
            proxy_pass http://app;
            proxy_http_version 1.1;
            proxy_set_header Host $host;
            proxy_set_header Upgrade $http_upgrade;
            proxy_set_header Connection $connection_upgrade;
            proxy_buffering off;
            proxy_request_buffering off;
        }}
    }}
}}
"""


def start_nginx(tmp: Path, app_port: int) -> tuple[subprocess.Popen[bytes] | None, int]:
    """nginx proxying to the app (None when Debian's nginx is not installed)."""
    binary = shutil.which("nginx") or (
        "/usr/sbin/nginx" if Path("/usr/sbin/nginx").exists() else None
    )
    if binary is None:
        print("nginx: not installed (apt-get install nginx-light); its rows are left out")
        return None, 0
    port = free_port()
    conf = tmp / "nginx.conf"
    conf.write_text(NGINX_CONF.format(tmp=tmp, app=app_port, port=port))
    proc = subprocess.Popen([binary, "-c", str(conf), "-p", str(tmp)], stderr=subprocess.DEVNULL)
    wait_listening(port)
    return proc, port


def added(direct: list[float], proxied: list[float]) -> None:
    print(f"  direct {p50(direct):6.2f} ms   proxied {p50(proxied):6.2f} ms", end="")
    print(f"   added {p50(proxied) - p50(direct):5.2f} ms (goal <= 2)")


def paired(direct: Any, proxied: Any, n: int) -> tuple[list[float], list[float]]:
    a, b = interleaved([direct, proxied], n)
    return a, b


def interleaved(calls: list[Any], n: int) -> list[list[float]]:
    """Each call's durations, the calls taking turns ``n`` times."""
    out: list[list[float]] = [[] for _ in calls]
    for _ in range(n):
        for fn, times in zip(calls, out, strict=True):
            t = time.perf_counter()
            fn()
            times.append(time.perf_counter() - t)
    return out


def own_start(port: int) -> float:
    """The app's own time from start to listening, on the host."""
    proc = subprocess.Popen([sys.executable, str(APP), str(port)], stdout=subprocess.DEVNULL)
    try:
        return wait_listening(port)
    finally:
        proc.kill()
        proc.wait()


async def action_to_ready(tmp: Path, runs: int) -> None:
    path = shutil.which("bwrap")
    sandbox = Bubblewrap(path) if path else None
    if sandbox is not None and sandbox.probe() is not None:
        sandbox = None
    settings = Settings(
        _env_file=None,
        database_url=f"sqlite:///{tmp}/ready.db",
        workspace_dir=tmp / "ws",
        preview_socket_dir=tmp / "pv-ready",
    )
    store = Store(settings.database_url)
    store.migrate()
    cid = await store.create_conversation("u", "bench")
    ws = workspace_path(Path(settings.workspace_dir).resolve(), "u", cid)
    ws.mkdir(parents=True)
    shutil.copy(APP, ws / "app.py")
    host = PreviewHost(settings, store, "bench")
    runtime = LocalRuntime(sandbox=sandbox)
    own: list[float] = []
    action: list[float] = []
    for i in range(runs):
        port = free_port()
        own.append(await asyncio.to_thread(own_start, port))
        t = time.perf_counter()
        got = await host.start(
            runtime, ws, name=f"b{i}", port=8080, path="/", command="python3 app.py 8080"
        )
        action.append(time.perf_counter() - t)
        assert got.ok, got.content
        await host.stop(cid, f"b{i}")
    await host.close()
    await store.close()
    where = "bubblewrap" if sandbox is not None else "unsandboxed (no working bubblewrap)"
    print(f"action -> ready ({where}, {runs} runs, medians):")
    print(f"  the app's own start to listening  {p50(own):8.1f} ms")
    print(f"  the preview action to ready       {p50(action):8.1f} ms")
    print(f"  added                             {p50(action) - p50(own):8.1f} ms  (goal <= 1000)")


def main(requests: int, runs: int, big_repeats: int) -> int:
    tmp = Path(tempfile.mkdtemp(prefix="planact-bench-preview-"))
    try:
        app_port, origin_port = free_port(), free_port()
        app = subprocess.Popen([sys.executable, str(APP), str(app_port)], stdout=subprocess.DEVNULL)
        sockdir = tmp / "fwd"
        sockdir.mkdir()
        fwd = subprocess.Popen(
            ["python3", "-I", "-S", forwarder.__file__, str(sockdir), str(app_port)]
        )
        wait_listening(app_port)
        while not (sockdir / "s").exists():
            time.sleep(0.01)
        settings = Settings(
            _env_file=None,
            database_url=f"sqlite:///{tmp}/bench.db",
            workspace_dir=tmp / "ws",
            preview_url=f"http://127.0.0.1:{origin_port}",
        )
        store = Store(settings.database_url)
        store.migrate()
        token = "benchtoken0123456789abcdefghijkl"

        seeded = seed_ready_service(
            store,
            port=app_port,
            socket=str(sockdir / "s"),
            token=token,
            owner="bench",
            title="bench",
        )
        asyncio.run(seeded)
        origin = subprocess.Popen(
            [sys.executable, __file__, "--origin", settings.database_url, str(origin_port)]
        )
        wait_listening(origin_port)
        direct = f"http://127.0.0.1:{app_port}"
        proxied = f"http://127.0.0.1:{origin_port}/p/{token}"
        nginx, nginx_port = start_nginx(tmp, app_port)
        via_nginx = f"http://127.0.0.1:{nginx_port}" if nginx is not None else ""
        print("load average (1, 5, 15 min): {:.2f} {:.2f} {:.2f}".format(*os.getloadavg()))
        with httpx.Client(timeout=60) as c:
            for base in (direct, proxied):  # warm both paths
                c.get(base + "/api/hello")
            a, b = paired(
                lambda: c.get(direct + "/api/hello"),
                lambda: c.get(proxied + "/api/hello"),
                requests,
            )
            print(f"small GET ({requests} each, keep-alive), p50:")
            added(a, b)
            for base in (direct, proxied):  # warm the big paths too (buffers, both pipes)
                for _ in range(2):
                    c.request("PUT", f"{base}/big/{BIG}")
                    c.post(base + "/upload", content=b"w" * BIG)
            bases = [direct, proxied] + ([via_nginx] if via_nginx else [])
            for base in bases[2:]:
                for _ in range(2):
                    c.request("PUT", f"{base}/big/{BIG}")
                    c.post(base + "/upload", content=b"w" * BIG)
            body = b"x" * BIG

            def fetch(base: str) -> Any:
                return lambda: c.request("PUT", f"{base}/big/{BIG}")

            def send(base: str) -> Any:
                return lambda: c.post(base + "/upload", content=body)

            downs = interleaved([fetch(b) for b in bases], big_repeats)
            ups = interleaved([send(b) for b in bases], big_repeats)
            for label, times in (("download", downs), ("upload", ups)):
                rates = [BIG / statistics.median(t) / 1e6 for t in times]
                print(
                    f"10 MB {label}: direct {rates[0]:6.0f} MB/s   planact {rates[1]:6.0f} MB/s",
                    end="",
                )
                if len(rates) > 2:
                    print(
                        f"   nginx {rates[2]:6.0f} MB/s"
                        f"   planact / nginx {rates[1] / rates[2]:4.2f}",
                        end="",
                    )
                    print(" (goal >= 0.95)", end="")
                print(f"   planact / direct {rates[1] / rates[0]:4.2f}")
            # CPU per 10 MB of each process (steadier than the wall clock on a loaded machine:
            # on a saturated machine throughput follows the CPU a byte costs)
            procs = {"client": os.getpid(), "app": app.pid, "forwarder": fwd.pid}
            procs["origin"] = origin.pid
            if nginx is not None:
                procs["nginx"] = nginx.pid
            print("CPU per 10 MB (user+system ms; forwarder and origin: the proxy's cost):")

            def download(base: str) -> httpx.Response:
                return c.request("PUT", f"{base}/big/{BIG}")

            def upload(base: str) -> httpx.Response:
                return c.post(base + "/upload", content=body)

            ways = [("direct", direct), ("planact", proxied)]
            ways += [("nginx", via_nginx)] if via_nginx else []
            for label, call in (("download", download), ("upload", upload)):
                for way, base in ways:
                    before = {k: cpu_seconds(pid) for k, pid in procs.items()}
                    for _ in range(big_repeats):
                        call(base)
                    used = {
                        k: (cpu_seconds(pid) - before[k]) / big_repeats * 1000
                        for k, pid in procs.items()
                    }
                    parts = "  ".join(f"{k} {v:5.1f}" for k, v in used.items())
                    print(f"  {label:8} {way:7}  {parts}  total {sum(used.values()):5.1f}")
        with (
            connect(direct.replace("http", "ws") + "/ws") as wa,
            connect(proxied.replace("http", "ws") + "/ws") as wb,
        ):

            def echo(ws: Any) -> None:
                ws.send("ping")
                ws.recv(timeout=10)

            ea, eb = paired(lambda: echo(wa), lambda: echo(wb), requests)
            print(f"WebSocket echo ({requests} each), p50:")
            added(ea, eb)
        origin.kill()
        origin.wait()
        if nginx is not None:
            nginx.kill()
            nginx.wait()
        asyncio.run(store.close())
        fwd.kill()
        app.kill()
        fwd.wait()
        app.wait()
        asyncio.run(action_to_ready(tmp, runs))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--requests", type=int, default=300)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--big-repeats", type=int, default=20)
    parser.add_argument("--origin", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.origin:
        serve_origin(args.origin[0], int(args.origin[1]))
    sys.exit(main(args.requests, args.runs, args.big_repeats))
