"""Where a 10 MB body's cost goes, direct and through the preview origin: the setup of
bench/bench_preview.py (the same app, forwarder, origin process and httpx client), the same
bodies, measured per process with `perf stat` (CPU, context switches, syscalls by name) and
the sizes the client's and the app's receives return (`perf record` of their exits).

    uv run python bench/diagnose_preview.py [--bodies N] [--rounds N] [--ab KEY=VALUE ...]

``--ab`` starts a second origin with those variables in its environment (an experiment's
switch) and interleaves direct, the origin as is (A) and the second one (B), body by body,
in every round: each round prints both ratios. Needs /usr/bin/perf (root or
perf_event_paranoid <= 1) for the counters; ``--no-perf`` prints the throughput only.
Prints figures; asserts nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx

from backend.runtime import forwarder
from backend.store.repo import Store
from bench.bench_preview import APP, BIG, wait_listening
from tests.support.ports import free_port
from tests.support.previews import seed_ready_service

HERE = Path(__file__).resolve()
PREVIEW_BENCH = HERE.with_name("bench_preview.py")
SYSCALLS = (
    "recvfrom",
    "sendto",
    "poll",
    "splice",
    "epoll_wait",
    "epoll_pwait",
    "epoll_ctl",
    "read",
    "write",
    "futex",
)
EVENTS = ["cpu-clock", "context-switches"] + [f"syscalls:sys_enter_{s}" for s in SYSCALLS]
KEEP = os.environ.get("DIAGNOSE_KEEP") == "1"  # keep the profiles' perf.data files
TOKEN = "bench-token-0123456789abcdefghijk"


def perf_started(commands: list[list[str]], settle: float = 0.3) -> list[subprocess.Popen[bytes]]:
    """Start each perf command and give it ``settle`` seconds to attach."""
    procs = [
        subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        for cmd in commands
    ]
    time.sleep(settle)  # perf attached
    return procs


def perf_stopped(procs: list[subprocess.Popen[bytes]]) -> None:
    """End them as Ctrl-C does (each writes its file) and wait for each."""
    for proc in procs:
        proc.send_signal(signal.SIGINT)
    for proc in procs:
        proc.wait()


@contextmanager
def perf_stat(pids: dict[str, int], out: dict[str, dict[str, float]]) -> Iterator[None]:
    """Count EVENTS in each process while the block runs (into ``out[name][event]``)."""
    tmp = Path(tempfile.mkdtemp(prefix="planact-perf-"))
    procs = perf_started(
        [
            [
                "perf",
                "stat",
                "-x",
                ",",
                "-o",
                str(tmp / name),
                "-e",
                ",".join(EVENTS),
                "-p",
                str(pid),
            ]
            for name, pid in pids.items()
        ]
    )
    try:
        yield
    finally:
        perf_stopped(procs)
        for name in pids:
            counts: dict[str, float] = {}
            for line in (tmp / name).read_text().splitlines():
                parts = line.split(",")
                if len(parts) > 2 and parts[2] in EVENTS:
                    try:
                        counts[parts[2]] = float(parts[0])
                    except ValueError:
                        counts[parts[2]] = 0.0
            out[name] = counts
        shutil.rmtree(tmp, ignore_errors=True)


@contextmanager
def exits_of(pids: dict[str, int], out: dict[str, list[int]]) -> Iterator[None]:
    """The values the receives of each process returned while the block ran."""
    tmp = Path(tempfile.mkdtemp(prefix="planact-perf-"))
    events = "syscalls:sys_exit_recvfrom,syscalls:sys_exit_splice"
    procs = perf_started(
        [
            ["perf", "record", "-q", "-o", str(tmp / name), "-e", events, "-p", str(pid)]
            for name, pid in pids.items()
        ]
    )
    try:
        yield
    finally:
        perf_stopped(procs)
        for name in pids:
            text = subprocess.run(
                ["perf", "script", "-i", str(tmp / name), "-F", "event,trace"],
                capture_output=True,
                text=True,
            ).stdout
            for line in text.splitlines():
                if "0x" in line:
                    call = line.split("sys_exit_", 1)[1].split(":", 1)[0]
                    value = int(line.rsplit("0x", 1)[1].strip(), 16)
                    if value < 1 << 63:
                        out.setdefault(f"{name} {call}", []).append(value)
        shutil.rmtree(tmp, ignore_errors=True)


@contextmanager
def profiles(pids: dict[str, int], top: int) -> Iterator[None]:
    """Print each process's hottest symbols (kernel and user, self time) over the block."""
    tmp = Path(tempfile.mkdtemp(prefix="planact-perf-"))
    record = ["perf", "record", "-q", "-g", "-F", "4999"]
    procs = perf_started(
        [
            [*record, "-o", str(tmp / name.replace(" ", "-")), "-p", str(pid)]
            for name, pid in pids.items()
        ]
    )
    try:
        yield
    finally:
        perf_stopped(procs)
        for name in pids:
            report = subprocess.run(
                [
                    *("perf", "report", "-i", str(tmp / name.replace(" ", "-")), "--stdio"),
                    *("--no-children", "--sort", "sym", "--percent-limit", "1.5", "-g", "none"),
                ],
                capture_output=True,
                text=True,
            ).stdout
            rows = [line for line in report.splitlines() if line.strip() and line[0] != "#"]
            print(f"    {name}: " + "; ".join(" ".join(r.split()) for r in rows[:top]))
        if KEEP:
            print(f"    (perf data kept in {tmp})")
        else:
            shutil.rmtree(tmp, ignore_errors=True)


@contextmanager
def sched_times(pids: dict[str, int], bodies: int) -> Iterator[None]:
    """Print, per process, its time running, waiting for a CPU while runnable (preempted or
    woken) and asleep (waiting for data or room), per 10 MB (`perf sched`, whole machine)."""
    tmp = Path(tempfile.mkdtemp(prefix="planact-perf-"))
    procs = perf_started([["perf", "sched", "record", "-a", "-o", str(tmp / "sched")]], 0.5)
    try:
        yield
    finally:
        perf_stopped(procs)
        text = subprocess.run(
            [
                *("perf", "sched", "timehist", "-i", str(tmp / "sched"), "--state"),
                *("-p", ",".join(str(p) for p in pids.values())),
            ],
            capture_output=True,
            text=True,
        ).stdout
        shutil.rmtree(tmp, ignore_errors=True)
        names = {pid: name for name, pid in pids.items()}
        totals: dict[str, dict[str, float]] = {}
        for line in text.splitlines():
            parts = line.split()
            if len(parts) < 7 or not parts[2].endswith("]"):
                continue
            try:
                pid = int(parts[2].rsplit("[", 1)[1].rstrip("]").split("/")[-1])
            except ValueError:
                continue
            if pid not in names:
                continue
            try:
                wait, delay, run = (float(x) for x in parts[3:6])
            except ValueError:
                continue
            t = totals.setdefault(names[pid], collections.defaultdict(float))
            t["run"] += run
            t["ready"] += delay
            t["asleep"] += wait
            t["switches"] += 1
        for name, t in totals.items():
            parts = [f"{k} {t[k] / bodies:6.1f} ms" for k in ("run", "ready", "asleep")]
            print(f"  sched {name:9} " + "  ".join(parts) + f"  runs {t['switches'] / bodies:.0f}")


NET = (
    "Tcp:OutSegs",
    "Tcp:InSegs",
    "TcpExt:DelayedACKs",
    "TcpExt:TCPPureAcks",
    "TcpExt:TCPHPAcks",
    "TcpExt:TCPHPHits",
    "TcpExt:PruneCalled",
    "TcpExt:RcvPruned",
    "TcpExt:TCPRcvCollapsed",
    "TcpExt:TCPRcvCoalesce",
    "TcpExt:TCPBacklogCoalesce",
    "TcpExt:TCPAutoCorking",
    "TcpExt:TCPWantZeroWindowAdv",
    "TcpExt:TCPToZeroWindowAdv",
    "TcpExt:TCPFromZeroWindowAdv",
    "TcpExt:TCPRcvQDrop",
)


def net_counters() -> dict[str, int]:
    """The machine's TCP counters (/proc/net/snmp and netstat; other work counts too)."""
    found: dict[str, int] = {}
    for path in ("/proc/net/snmp", "/proc/net/netstat"):
        lines = Path(path).read_text().splitlines()
        for names, values in zip(lines[::2], lines[1::2], strict=False):
            kind = names.split(":", 1)[0]
            for k, v in zip(names.split()[1:], values.split()[1:], strict=False):
                found[f"{kind}:{k}"] = int(v)
    return found


def sizes(values: list[int]) -> str:
    if not values:
        return "none"
    buckets: collections.Counter[str] = collections.Counter()
    for v in values:
        if v < 4096:
            buckets["<4K"] += 1
        elif v < 16384:
            buckets["4-16K"] += 1
        elif v < 65536:
            buckets["16-64K"] += 1
        else:
            buckets[">=64K"] += 1
    parts = " ".join(f"{k}:{buckets[k]}" for k in ("<4K", "4-16K", "16-64K", ">=64K"))
    return f"n {len(values)} median {statistics.median(values):.0f} ({parts})"


def start_origin(database_url: str, env: dict[str, str]) -> tuple[subprocess.Popen[bytes], int]:
    port = free_port()
    cmd = [sys.executable, str(PREVIEW_BENCH), "--origin", database_url, str(port)]
    proc = subprocess.Popen(cmd, env={**os.environ, **env})
    wait_listening(port)
    return proc, port


def main(bodies: int, rounds: int, ab: dict[str, str], perf: bool, top: int, sched: bool) -> int:
    tmp = Path(tempfile.mkdtemp(prefix="planact-diag-preview-"))
    started: list[subprocess.Popen[bytes]] = []
    try:
        app_port = free_port()
        app = subprocess.Popen([sys.executable, str(APP), str(app_port)], stdout=subprocess.DEVNULL)
        started.append(app)
        sockdir = tmp / "fwd"
        sockdir.mkdir()
        cmd = ["python3", "-I", "-S", forwarder.__file__, str(sockdir), str(app_port)]
        started.append(subprocess.Popen(cmd))
        wait_listening(app_port)
        while not (sockdir / "s").exists():
            time.sleep(0.01)
        database_url = f"sqlite:///{tmp}/bench.db"
        store = Store(database_url)
        store.migrate()
        seeded = seed_ready_service(
            store, port=app_port, socket=str(sockdir / "s"), token=TOKEN, owner="b", title="b"
        )
        asyncio.run(seeded)
        asyncio.run(store.close())
        origins = {"A": start_origin(database_url, {})}
        if ab:
            origins["B"] = start_origin(database_url, ab)
        started.extend(proc for proc, _ in origins.values())
        bases = {"direct": f"http://127.0.0.1:{app_port}"}
        bases.update({k: f"http://127.0.0.1:{port}/p/{TOKEN}" for k, (_, port) in origins.items()})
        body = b"x" * BIG
        print("load average (1, 5, 15 min): {:.2f} {:.2f} {:.2f}".format(*os.getloadavg()))
        if ab:
            print(f"B: {ab}")
        with httpx.Client(timeout=60) as c:
            calls: dict[str, Callable[[str], httpx.Response]] = {
                "download": lambda base: c.request("PUT", f"{base}/big/{BIG}"),
                "upload": lambda base: c.post(base + "/upload", content=body),
            }
            for base in bases.values():  # warm every path
                for call in calls.values():
                    call(base)
                    call(base)
            for r in range(rounds):
                line = [f"round {r + 1}:"]
                for label, call in calls.items():
                    times: dict[str, list[float]] = {k: [] for k in bases}
                    for i in range(bodies):
                        order = list(bases.items())
                        if i % 2:  # A and B take turns going first after direct
                            order[1:] = order[:0:-1]
                        for way, base in order:
                            t = time.perf_counter()
                            call(base)
                            times[way].append(time.perf_counter() - t)
                    rate = {k: BIG / statistics.median(v) / 1e6 for k, v in times.items()}
                    ratios = " ".join(
                        f"{k} {rate[k] / rate['direct']:.2f}" for k in bases if k != "direct"
                    )
                    line.append(f"{label} direct {rate['direct']:.0f} MB/s, {ratios};")
                print(" ".join(line), flush=True)
            if not perf:
                return 0
            pids = {"client": os.getpid(), "app": app.pid}
            pids.update({f"origin {k}": proc.pid for k, (proc, _) in origins.items()})
            for label, call in calls.items():
                for way, base in bases.items():
                    counted: dict[str, dict[str, float]] = {}
                    with perf_stat(pids, counted):
                        net = net_counters()
                        for _ in range(bodies):
                            call(base)
                        after = net_counters()
                    print(f"{label} {way}, per 10 MB:")
                    moved = ((k, (after[k] - net[k]) / bodies) for k in NET if k in net)
                    print("  tcp: " + "  ".join(f"{k.split(':')[1]} {v:.0f}" for k, v in moved))
                    for name, counts in counted.items():
                        if not any(counts.values()):
                            continue
                        parts = [f"cpu {counts.get('cpu-clock', 0) / bodies:5.1f} ms"]
                        parts.append(f"cs {counts.get('context-switches', 0) / bodies:5.0f}")
                        for s in SYSCALLS:
                            n = counts.get(f"syscalls:sys_enter_{s}", 0) / bodies
                            if n >= 0.5:
                                parts.append(f"{s} {n:.0f}")
                        print(f"  {name:9} " + "  ".join(parts))
                    got: dict[str, list[int]] = {}
                    with exits_of(pids, got):
                        for _ in range(bodies):
                            call(base)
                    for name, values in got.items():
                        print(f"  {name:18} returned: {sizes(values)}")
                    if sched:
                        with sched_times(pids, bodies):
                            for _ in range(bodies):
                                call(base)
                    if top:
                        with profiles(pids, top):
                            for _ in range(bodies):
                                call(base)
    finally:
        for proc in started:
            proc.kill()
            proc.wait()
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--bodies", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--ab", nargs="*", default=[], help="KEY=VALUE for origin B")
    parser.add_argument("--no-perf", action="store_true")
    parser.add_argument("--sched", action="store_true", help="time running, ready, asleep")
    parser.add_argument("--profile", type=int, default=0, help="print each one's N hottest")
    args = parser.parse_args()
    pairs = dict(item.split("=", 1) for item in args.ab)
    sys.exit(main(args.bodies, args.rounds, pairs, not args.no_perf, args.profile, args.sched))
