"""The OpenAPI document against the real server: every operation's happy and error paths
answer as the document says (each answer checked by the clients' hook,
tests/openapi_check.py), and a third-party fuzzer (schemathesis) finds no 5xx and no answer
the document does not allow."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.server import Server, server_env, wait_for
from tests.fakellm import FakeModelServer
from tests.openapi_check import check_events
from tests.sse_client import iter_events

pytestmark = pytest.mark.e2e

TOKEN = "openapi-token"
SCHEMATHESIS = str(Path(sys.executable).with_name("schemathesis"))
BEARER = {"Authorization": f"Bearer {TOKEN}"}
JSON_ACCEPT = {**BEARER, "Accept": "application/json"}


@pytest.fixture(scope="module")
def model() -> Iterator[FakeModelServer]:
    server = FakeModelServer(auto=True).start()
    yield server
    for name in list(server.model.holds):
        server.release(name)
    server.stop()


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, model: FakeModelServer) -> Iterator[Server]:
    tmp = tmp_path_factory.mktemp("openapi")
    srv = Server(tmp, server_env(tmp, model.base_url, AUTH_TOKEN=TOKEN)).start()
    yield srv
    srv.stop()


def _ended(server: Server, cid: str) -> bool:
    with server.client(headers=BEARER) as c:
        runs = c.get(f"/api/conversations/{cid}").json()["runs"]
    return bool(runs) and all(r["status"] not in ("running", "waiting") for r in runs)


def test_every_operation_answers_as_documented_on_its_happy_and_error_paths(
    server: Server, model: FakeModelServer
) -> None:
    check = server.response_check()
    check.checked.clear()
    with server.client(headers=BEARER) as c:
        anon = server.client()
        # operating it
        assert c.get("/api/health").status_code == 200
        assert anon.get("/api/ready").status_code == 200
        assert anon.get("/api/openapi.json").status_code == 200
        assert anon.get("/api/docs").status_code == 200
        assert anon.get("/api/docs/init.js").status_code == 200
        assert anon.get("/api/docs/assets/swagger-ui.css").status_code == 200
        assert anon.get("/api/docs/assets/nope.js").status_code == 404
        assert anon.get("/api/settings").status_code == 401
        assert c.get("/api/settings").status_code == 200
        assert c.get("/api/mcp/servers").status_code == 200
        assert c.post("/api/llm/check").status_code == 200
        assert c.post("/api/llm/check", json={"model": "nope"}).status_code == 400
        assert c.post("/api/llm/check", content=b"{}").status_code == 415
        # a run, streamed; its events against the document
        with c.stream("POST", "/api/agent/run", json={"goal": "write hello.txt"}) as resp:
            assert resp.status_code == 200
            events = [(ev.event, ev.json) for ev in iter_events(resp.iter_lines())]
            cid, rid = resp.headers["x-conversation-id"], resp.headers["x-run-id"]
        assert events[-1] == ("end", {"conversation_id": cid, "run_id": rid, "status": "completed"})
        check_events(check.document, "/api/agent/run", "post", events)
        with c.stream("GET", f"/api/agent/runs/{rid}/events?after=1") as resp:
            replayed = [(ev.event, ev.json) for ev in iter_events(resp.iter_lines())]
        check_events(check.document, "/api/agent/runs/{run_id}/events", "get", replayed)
        assert c.get(f"/api/agent/runs/{rid}/events?after=x").status_code == 400
        assert c.get("/api/agent/runs/nope/events").status_code == 404
        # runs: 202, errors
        assert c.post("/api/agent/run", json={"goal": ""}).status_code == 400
        assert c.post("/api/agent/run", json={"goal": "x" * 100_001}).status_code == 413
        assert c.post("/api/agent/run", content=b"goal", headers=BEARER).status_code == 415
        # a run whose model call is held: a second one conflicts; stopped, it can be retried
        model.script({"stage": "thinking", "content": "<finish>x</finish>", "hold": "held"})
        body = {"goal": "again", "conversation_id": cid}
        started = c.post("/api/agent/run", json=body, headers=JSON_ACCEPT)
        assert started.status_code == 202
        held = started.json()["run_id"]
        wait_for(lambda: "held" in model.model.holds, what="the held model call")
        assert c.post("/api/agent/run", json=body, headers=JSON_ACCEPT).status_code == 409
        assert c.post(f"/api/agent/runs/{held}/retry", json={}).status_code == 409
        assert c.post(f"/api/agent/runs/{held}/stop").status_code == 202
        assert c.post("/api/agent/runs/nope/stop").status_code == 404
        wait_for(lambda: _ended(server, cid), what="the stopped run to end")
        model.release("held")
        retried = c.post(f"/api/agent/runs/{held}/retry", headers=JSON_ACCEPT)
        assert retried.status_code == 202
        assert c.post("/api/agent/runs/nope/retry").status_code == 404
        wait_for(lambda: _ended(server, cid), what="the retried run to end")
        # waits: no pending approval or question here (their happy paths: test_approvals)
        approval = f"/api/agent/runs/{rid}/approvals/nope"
        assert c.post(approval, json={"decision": "maybe"}).status_code == 400
        assert c.post(approval, json={"decision": "approve"}).status_code == 404
        answer = f"/api/agent/runs/{rid}/answers/nope"
        assert c.post(answer, json={"answer": 1}).status_code == 400
        assert c.post(answer, json={"answer": "yes"}).status_code == 404
        # conversations and files
        assert c.get("/api/conversations?q=write").status_code == 200
        assert c.get("/api/conversations?q=" + "x" * 501).status_code == 400
        assert c.get(f"/api/conversations/{cid}").status_code == 200
        assert c.get(f"/api/conversations/{cid}/messages?after=2").status_code == 200
        assert c.patch(f"/api/conversations/{cid}", json={"title": "Hello"}).status_code == 200
        assert c.patch(f"/api/conversations/{cid}", json={"title": " "}).status_code == 400
        assert c.patch("/api/conversations/nope", json={"title": "t"}).status_code == 404
        made = c.post("/api/conversations", json={"title": "empty"})
        assert made.status_code == 201
        new = made.json()["conversation_id"]
        up = c.post(f"/api/conversations/{new}/files", files={"file": ("in.txt", b"hi")})
        assert up.status_code == 201
        assert c.post(f"/api/conversations/{new}/files", content=b"x").status_code == 415
        assert c.get(f"/api/conversations/{new}/files").status_code == 200
        assert c.get(f"/api/files/{new}/in.txt").status_code == 200
        assert c.get(f"/api/files/{new}/../../etc/passwd").status_code == 404
        assert c.get(f"/api/conversations/{new}/files.zip").status_code == 200
        assert c.get("/api/conversations/nope/files.zip").status_code == 404
        assert c.delete(f"/api/conversations/{new}").status_code == 200
        assert c.delete(f"/api/conversations/{new}").status_code == 404
        # previews: none started here (their happy paths: tests/previews)
        assert c.get(f"/api/conversations/{cid}/previews").json() == []
        assert c.get("/api/conversations/nope/previews").status_code == 404
        assert c.post(f"/api/conversations/{cid}/previews/app/stop").status_code == 404
        assert c.post(f"/api/conversations/{cid}/previews/app/restart").status_code == 404
        # checkpoints, rewind, fork, share (their whole story: tests/checkpoints)
        points = c.get(f"/api/conversations/{cid}/checkpoints")
        assert points.status_code == 200 and points.json(), points.text
        assert c.get("/api/conversations/nope/checkpoints").status_code == 404
        first, last = points.json()[0]["seq"], points.json()[-1]["seq"]
        assert c.get(f"/api/conversations/{cid}/checkpoints/{first}/diff").status_code == 200
        assert c.get(f"/api/conversations/{cid}/checkpoints/999999/diff").status_code == 404
        fork = c.post(f"/api/conversations/{cid}/fork", json={"seq": first})
        assert fork.status_code == 201
        assert c.post(f"/api/conversations/{cid}/fork", json={"seq": 999999}).status_code == 404
        assert c.post(f"/api/conversations/{cid}/fork", json={"seq": "x"}).status_code == 400
        shared = c.post(f"/api/conversations/{cid}/share")
        assert shared.status_code == 201
        token = shared.json()["token"]
        view = anon.get(f"/api/shared/{token}")
        assert view.status_code == 200
        for entry in view.json()["files"][:1]:
            assert anon.get(f"/api/shared/{token}/files/{entry['filepath']}").status_code == 200
        assert anon.get(f"/api/shared/{token}/files/nope.txt").status_code == 404
        assert c.delete(f"/api/conversations/{cid}/share").status_code == 200
        assert anon.get(f"/api/shared/{token}").status_code == 404
        rewound = c.post(f"/api/conversations/{cid}/rewind", json={"seq": last})
        assert rewound.status_code == 200
        assert c.post(f"/api/conversations/{cid}/rewind", json={"seq": 999999}).status_code == 404
        assert c.get(f"/api/conversations/{cid}/messages?all=1").status_code == 200
        assert c.get("/api/no-such-route").status_code == 404  # the catch-all, undocumented
        anon.close()
    operations = {
        (method.upper(), path) for path, item in check.document["paths"].items() for method in item
    }
    seen = {(m, p) for m, p, _s in check.checked}
    assert operations <= seen, operations - seen
    for method, path in operations:
        statuses = {s for m, p, s in check.checked if (m, p) == (method, path)}
        # happy paths elsewhere, through the same hook: test_approvals, tests/previews
        if not any(part in path for part in ("/approvals/", "/answers/", "/previews/")):
            assert any(s < 300 for s in statuses), (method, path, statuses)
    assert any(s >= 400 for m, p, s in check.checked if p == "/api/agent/run")


def test_schemathesis_finds_no_server_error_and_no_answer_the_document_does_not_allow(
    server: Server, tmp_path: Path
) -> None:
    done = subprocess.run(
        [
            SCHEMATHESIS,
            "run",
            f"{server.url}/api/openapi.json",
            "--checks",
            "not_a_server_error,status_code_conformance,content_type_conformance,"
            "response_schema_conformance",
            "--max-examples",
            "5",
            "--seed",
            "31",
            "--header",
            f"Authorization: Bearer {TOKEN}",
            "--request-timeout",
            "60",
            "--no-color",
        ],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-6000:] + done.stderr[-2000:]
    assert "passed" in done.stdout
