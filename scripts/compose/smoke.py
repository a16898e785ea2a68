#!/usr/bin/env python3
"""End-to-end checks of a running planact deployment, over HTTP only (stdlib only).

  smoke.py run   --url URL --token T --fake-url FAKE [--runtime docker [--by-default]]
      scripts the fake model (tests/fakellm.py) for one run whose task runs a command in
      the runtime and writes a file (--by-default: the runtime is the server's default, so
      the run's body does not name it); POSTs the goal, follows the SSE stream to
      `finish_summery` and `end`, downloads the files it lists and compares their bytes;
      prints the conversation id on stdout.
  smoke.py check --url URL --token T --conversation ID
      the conversation, its messages and its files are still there (after a restart).
  smoke.py scaled --url URL --url2 URL2 --token T --conversation ID
      a worker ran the conversation's run and both API replicas serve it; each replica is
      asked once its own /api/health answers ok.
  smoke.py wait  --url URL [--timeout S]
      waits until GET /api/health answers {"status": "ok"}; prints the seconds it took.
  smoke.py prometheus --url PROMETHEUS_URL [--timeout S]
      waits until Prometheus scrapes both API replicas and both workers and its query API
      counts the completed run (planact_runs_total).

Exit status 0 when every check passed; each check prints one line on stderr.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from typing import Any

# What the scripted task makes: a binary file written by a command in the runtime (every
# byte value, so that any transcoding on the way shows) and a text file from write_code.
BLOB = bytes(range(256)) * 64
TEXT = "planact: é <ok> & fin"
GEN = (
    "import os\n"
    "open('blob.bin', 'wb').write(bytes(range(256)) * 64)\n"
    "open('sandbox-uid.txt', 'w').write(str(os.getuid()))\n"
)
THINKING = (
    f"<write_code><path>gen.py</path><content>{GEN}</content></write_code>\n"
    "<terminal_run><command>python3 gen.py</command></terminal_run>\n"
    f"<write_code><path>notes/text.txt</path><content>{TEXT}</content></write_code>\n"
    "<finish><message>Made blob.bin and notes/text.txt.</message></finish>"
)
PLAN = json.dumps(
    [
        {
            "title": "Make the files",
            "description": "blob.bin and notes/text.txt",
            "requirement": "both exist",
        }
    ]
)


def ok(msg: str) -> None:
    print(f"  ok   {msg}", file=sys.stderr, flush=True)


def fail(msg: str) -> None:
    print(f"  FAIL {msg}", file=sys.stderr, flush=True)
    sys.exit(1)


def request(
    url: str,
    token: str | None = None,
    body: Any = None,
    timeout: float = 30,
    accept: str = "application/json",
) -> urllib.request.Request:
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url, data=data, method="POST" if data is not None else "GET")
    req.add_header("Accept", accept)
    if data is not None:
        req.add_header("Content-Type", "application/json")
    if token:
        req.add_header("Authorization", f"Bearer {token}")
    return req


def get(url: str, token: str | None = None, timeout: float = 30) -> bytes:
    with urllib.request.urlopen(request(url, token), timeout=timeout) as resp:
        return resp.read()


def get_json(url: str, token: str | None = None, timeout: float = 30) -> Any:
    return json.loads(get(url, token, timeout))


def post_json(url: str, body: Any, token: str | None = None) -> Any:
    with urllib.request.urlopen(request(url, token, body), timeout=30) as resp:
        return json.loads(resp.read() or b"null")


def follow(resp: Any, deadline: float) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Read an SSE stream to its `end` event: (messages, end payload)."""
    messages: list[dict[str, Any]] = []
    event, data = "message", []
    for raw in resp:
        if time.monotonic() > deadline:
            fail("the stream did not end in time")
        line = raw.decode("utf-8").rstrip("\r\n")
        if line.startswith(":"):
            continue
        if line == "":
            if data:
                payload = json.loads("\n".join(data))
                if event == "end":
                    return messages, payload
                messages.append(payload)
            event, data = "message", []
        elif line.startswith("event:"):
            event = line[6:].strip()
        elif line.startswith("data:"):
            value = line[5:]
            data.append(value[1:] if value.startswith(" ") else value)
    fail(f"the stream closed without an end event after {len(messages)} messages")
    raise AssertionError  # unreachable


def check_files(url: str, token: str, files: list[dict[str, Any]]) -> None:
    by_path = {f["filepath"]: f for f in files}
    for path, expected in (("blob.bin", BLOB), ("notes/text.txt", TEXT.encode())):
        if path not in by_path:
            fail(f"{path} is not among the run's files: {sorted(by_path)}")
        got = get(url + by_path[path]["url"], token)
        if got != expected:
            fail(
                f"{path}: downloaded {len(got)} bytes that differ from the {len(expected)} "
                f"expected (first bytes {got[:40]!r})"
            )
        ok(f"downloaded {path}: {len(got)} bytes, identical")


def wait_runtime(url: str, runtime: str, timeout: float) -> None:
    """The server offers a runtime once it has probed it (the docker one asynchronously)."""
    deadline = time.monotonic() + timeout
    offered: list[str] = []
    while time.monotonic() < deadline:
        offered = get_json(f"{url}/api/health").get("runtimes", [])
        if runtime in offered:
            return
        time.sleep(0.2)
    fail(f"the server does not offer the {runtime} runtime (offers {offered})")


def cmd_run(args: argparse.Namespace) -> None:
    fake = args.fake_url.rstrip("/")
    if args.runtime:
        wait_runtime(args.url, args.runtime, args.timeout)
        ok(f"the server offers the {args.runtime} runtime")
    post_json(f"{fake}/_control/reset", {})
    post_json(
        f"{fake}/_control/script",
        {
            "replies": [
                {"stage": "auto_reply", "content": "I will make two files."},
                {"stage": "planning", "content": PLAN},
                {"stage": "thinking", "content": THINKING},
                {"stage": "summary", "content": "Made blob.bin and notes/text.txt."},
            ]
        },
    )
    body: dict[str, Any] = {"goal": "Make blob.bin and notes/text.txt", "mode": "agent"}
    if args.runtime and not args.by_default:
        body["runtime"] = args.runtime
    started = time.monotonic()
    req = request(f"{args.url}/api/agent/run", args.token, body, accept="text/event-stream")
    with urllib.request.urlopen(req, timeout=args.timeout) as resp:
        cid = resp.headers.get("X-Conversation-Id")
        messages, end = follow(resp, started + args.timeout)
    kinds = [m.get("meta", {}).get("action_type") for m in messages]
    if end.get("status") != "completed":
        errors = [m.get("content") for m in messages if m["meta"].get("action_type") == "error"]
        fail(f"run ended {end.get('status')}: {errors or kinds}")
    ok(
        f"run completed in {time.monotonic() - started:.1f}s: {len(messages)} messages "
        f"({', '.join(dict.fromkeys(k for k in kinds if k))})"
    )
    actions = {
        m["meta"]["action_type"]: m
        for m in messages
        if m["meta"].get("action_type") in ("terminal_run", "write_code")
        and m.get("status") != "running"
    }
    for name in ("terminal_run", "write_code"):
        if actions.get(name, {}).get("status") != "success":
            fail(f"{name} did not succeed: {actions.get(name, {}).get('content')!r}")
    ok("terminal_run and write_code succeeded")
    summaries = [m for m in messages if m["meta"].get("action_type") == "finish_summery"]
    if not summaries:
        fail(f"no finish_summery in the stream: {kinds}")
    ok(f"finish_summery lists {[f['filepath'] for f in summaries[-1]['meta']['json']]}")
    check_files(args.url, args.token, summaries[-1]["meta"]["json"])
    files = get_json(f"{args.url}/api/conversations/{cid}/files", args.token)
    uid = next((f for f in files if f["filepath"] == "sandbox-uid.txt"), None)
    if uid:
        ok("the command ran as uid " + get(args.url + uid["url"], args.token).decode().strip())
    print(cid)


def cmd_check(args: argparse.Namespace) -> None:
    cid = args.conversation
    conv = get_json(f"{args.url}/api/conversations/{cid}", args.token)
    ok(f"conversation {cid} is there (status {conv.get('status')})")
    messages = get_json(f"{args.url}/api/conversations/{cid}/messages", args.token)
    summaries = [m for m in messages if m["meta"].get("action_type") == "finish_summery"]
    if not summaries:
        fail("its messages lost the finish_summery")
    ok(f"its {len(messages)} messages are there, finish_summery included")
    check_files(args.url, args.token, summaries[-1]["meta"]["json"])


def cmd_scaled(args: argparse.Namespace) -> None:
    """A worker ran the conversation's run; the second API replica serves the same. Each
    replica is asked only once its own /api/health answers ok (the second one may still be
    starting when the first has served the run)."""
    cid = args.conversation
    url2 = args.url2.rstrip("/")
    answers = []
    for url in (args.url, url2):
        secs, _health = wait_health(url, args.timeout)
        ok(f"{url}/api/health answered ok (waited {secs:.1f}s)")
        answers.append(get_json(f"{url}/api/conversations/{cid}", args.token))
    one, two = answers
    owner = one["runs"][-1].get("owner") or ""
    if not owner.startswith("worker-"):
        fail(f"the run's owner is {owner!r}, not a worker")
    if one["runs"] != two["runs"]:
        fail("the two API replicas disagree about the conversation's runs")
    ok(f"a worker ({owner}) ran the goal; both API replicas serve it")


def prometheus_value(url: str, promql: str) -> float | None:
    query = urllib.parse.urlencode({"query": promql})
    body = get_json(f"{url}/api/v1/query?{query}")
    result = body.get("data", {}).get("result", [])
    return float(result[0]["value"][1]) if result else None


def cmd_prometheus(args: argparse.Namespace) -> None:
    """Prometheus scrapes the replicas and the workers, and counts the run."""
    started = time.monotonic()
    wanted = {
        'count(up{job="planact-api"} == 1)': 2.0,
        'count(up{job="planact-worker"} == 1)': 2.0,
        'sum(planact_runs_total{status="completed"})': 1.0,
    }
    last: dict[str, float | None] = {}
    while time.monotonic() - started < args.timeout:
        try:
            last = {q: prometheus_value(args.url, q) for q in wanted}
        except (urllib.error.URLError, OSError, ValueError) as exc:
            last = {"error": None}
            print(f"  ...  {exc}", file=sys.stderr, flush=True)
        if all((last.get(q) or 0) >= n for q, n in wanted.items()):
            ok(f"Prometheus scrapes 2 API replicas and 2 workers and counts the run: {last}")
            return
        time.sleep(1)
    fail(f"Prometheus did not count the run within {args.timeout:.0f}s (last: {last})")


def wait_health(url: str, timeout: float) -> tuple[float, Any]:
    """Wait until ``url``'s GET /api/health answers {"status": "ok"} (a refused or reset
    connection is a server still starting): (seconds it took, the answer); fails after
    ``timeout``."""
    started = time.monotonic()
    last = ""
    while time.monotonic() - started < timeout:
        try:
            health = get_json(f"{url}/api/health", timeout=5)
            if health.get("status") == "ok":
                return time.monotonic() - started, health
            last = json.dumps(health)
        except (urllib.error.URLError, OSError, ValueError) as exc:
            last = str(exc)
        time.sleep(0.2)
    fail(f"{url}/api/health did not answer ok within {timeout:.0f}s (last: {last})")
    raise AssertionError("unreachable")


def cmd_wait(args: argparse.Namespace) -> None:
    secs, health = wait_health(args.url, args.timeout)
    print(f"{secs:.1f}")
    ok(f"/api/health: {json.dumps(health)}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="cmd", required=True)
    for name in ("run", "check", "wait", "scaled", "prometheus"):
        p = sub.add_parser(name)
        p.add_argument("--url", required=True)
        p.add_argument("--token")
        p.add_argument("--timeout", type=float, default=120)
        if name == "run":
            p.add_argument("--fake-url", required=True)
            p.add_argument("--runtime")
            p.add_argument("--by-default", action="store_true")
        if name in ("check", "scaled"):
            p.add_argument("--conversation", required=True)
        if name == "scaled":
            p.add_argument("--url2", required=True)
    args = parser.parse_args()
    args.url = args.url.rstrip("/")
    commands = {
        "run": cmd_run,
        "check": cmd_check,
        "wait": cmd_wait,
        "scaled": cmd_scaled,
        "prometheus": cmd_prometheus,
    }
    commands[args.cmd](args)


if __name__ == "__main__":
    try:
        main()
    except urllib.error.HTTPError as exc:
        fail(f"{exc.url}: HTTP {exc.code} {exc.read()[:300]!r}")
