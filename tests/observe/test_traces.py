"""OpenTelemetry traces (docs/api.md "Operating it"), black-box: real `planact serve`
processes export OTLP/HTTP to a receiver in the test (decoded with opentelemetry-proto).
One trace per run with stage, task, model-call (GenAI attributes) and action spans; the same
trace after a kill -9 and a resume on another process; no prompt or output unless capture is
on; nothing set up without an endpoint."""

from __future__ import annotations

import sqlite3
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import create_engine, text

from backend.observe.runtrace import parse_stored
from backend.observe.tracing import wanted
from tests.agent.scripts import finish, plan_reply, run
from tests.e2e.cluster import follow, start_json
from tests.e2e.server import Server, server_env, wait_for
from tests.fakellm import FakeModelServer
from tests.observe.otlp import OtlpReceiver, otel_env
from tests.pg import postgres_url, wipe

pytestmark = pytest.mark.e2e


@pytest.fixture
def receiver() -> Iterator[OtlpReceiver]:
    with OtlpReceiver() as got:
        yield got


def script_a_run(fake: FakeModelServer, prose: str = "I'll do it.") -> None:
    fake.script(
        {"stage": "planning", "content": plan_reply("Count", prose=prose)},
        {"stage": "thinking", "content": run("echo counted")},
        {
            "stage": "thinking",
            "content": finish("counted"),
            "prompt_tokens": 2_000,
            "cached_tokens": 1_536,
        },
    )


def run_spans(receiver: OtlpReceiver, rid: str) -> list[dict[str, Any]]:
    """Every span of the run's trace, once its model calls and actions are all in."""

    def complete() -> list[dict[str, Any]] | None:
        spans = receiver.all()
        roots = [s for s in spans if s["attributes"].get("planact.run_id") == rid]
        if not roots:
            return None
        mine = [s for s in spans if s["trace_id"] == roots[0]["trace_id"]]
        names = [s["name"] for s in mine]
        done = "run" in names and names.count("chat openai/fake-model") == 3
        return mine if done and "execute_tool terminal_run" in names else None

    found: list[dict[str, Any]] = wait_for(complete, what=f"the spans of run {rid}")
    return found


def attribute_text(spans: list[dict[str, Any]]) -> str:
    return repr([s["attributes"] for s in spans])


def test_each_run_is_one_trace_with_stage_task_model_and_action_spans(
    tmp_path: Path, fake_model: FakeModelServer, receiver: OtlpReceiver
) -> None:
    env = server_env(tmp_path, fake_model.base_url, **otel_env(receiver))
    server = Server(tmp_path, env).start()
    goals = [f"count for me {uuid.uuid4().hex}" for _ in range(2)]
    ids = []
    try:
        for goal in goals:
            script_a_run(fake_model)
            _, end, _ = server.run({"goal": goal, "mode": "agent"})
            assert end["status"] == "completed"
            ids.append((end["run_id"], end["conversation_id"]))
        traces = [run_spans(receiver, rid) for rid, _ in ids]
    finally:
        server.stop()
    trace_ids = [spans[0]["trace_id"] for spans in traces]
    assert len(set(trace_ids)) == 2  # one trace per run

    db = sqlite3.connect(tmp_path / "planact.db")
    for (rid, _), spans, trace_id in zip(ids, traces, trace_ids, strict=True):
        (stored,) = db.execute("SELECT trace_context FROM runs WHERE id = ?", (rid,)).fetchone()
        assert stored.split("-")[0] == trace_id  # its trace id is stored with the run
        by_name: dict[str, list[dict[str, Any]]] = {}
        for s in spans:
            by_name.setdefault(s["name"], []).append(s)
        (root,) = by_name["run"]
        assert root["parent"] == ""
        assert stored == f"{trace_id}-{root['span_id']}"
        assert root["attributes"]["planact.run.status"] == "completed"
        stages = {s["attributes"]["planact.stage"] for s in spans if s["name"].startswith("stage ")}
        assert {"route", "tasks", "summary"} <= stages
        (task,) = by_name["task"]
        assert task["attributes"]["planact.task.status"] == "success"
        stage_ids = {s["span_id"] for s in spans if s["name"].startswith("stage ")}
        assert task["parent"] in stage_ids
        calls = by_name["chat openai/fake-model"]
        for call in calls:
            a = call["attributes"]
            assert a["gen_ai.operation.name"] == "chat"
            assert a["gen_ai.request.model"] == "openai/fake-model"
            assert a["gen_ai.usage.input_tokens"] > 0
            assert a["gen_ai.usage.output_tokens"] > 0
            assert a["gen_ai.response.finish_reasons"] == ["stop"]
            assert a["gen_ai.usage.cache_creation.input_tokens"] == 0
        thinking = [c for c in calls if c["attributes"]["planact.stage"] == "thinking"]
        # the cached input the provider reported, as the GenAI conventions name it
        cached = [c["attributes"]["gen_ai.usage.cache_read.input_tokens"] for c in thinking]
        assert sorted(cached) == [0, 1_536]
        assert len(thinking) == 2 and all(c["parent"] == task["span_id"] for c in thinking)
        (action,) = by_name["execute_tool terminal_run"]
        assert action["attributes"]["planact.action.type"] == "terminal_run"
        assert action["attributes"]["planact.action.status"] == "success"
        assert action["parent"] == task["span_id"]
        # the HTTP request that started it: a span of its own trace, linked from the run
        posts = [
            s
            for s in receiver.all()
            if s["name"] == "POST" and s["attributes"].get("url.path") == "/api/agent/run"
        ]
        assert any(p["trace_id"] in root["links"] for p in posts)
        assert all(p["attributes"]["http.response.status_code"] == 200 for p in posts)
        # content stays out by default: no goal, no prompt, no reply in any span
        assert "gen_ai.input.messages" not in attribute_text(spans)
    for goal in goals:
        assert goal not in attribute_text(receiver.all())


def test_with_capture_on_prompts_and_replies_go_into_the_model_spans(
    tmp_path: Path, fake_model: FakeModelServer, receiver: OtlpReceiver
) -> None:
    extra = otel_env(receiver, OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT="true")
    env = server_env(tmp_path, fake_model.base_url, **extra)
    goal, reply = f"goal {uuid.uuid4().hex}", f"prose {uuid.uuid4().hex}"
    with_server = Server(tmp_path, env).start()
    try:
        script_a_run(fake_model, prose=reply)
        _, end, _ = with_server.run({"goal": goal, "mode": "agent"})
        spans = run_spans(receiver, end["run_id"])
    finally:
        with_server.stop()
    (planning,) = [s for s in spans if s["attributes"].get("planact.stage") == "planning"]
    assert goal in planning["attributes"]["gen_ai.input.messages"]
    assert reply in planning["attributes"]["gen_ai.output.messages"]


def test_a_run_resumed_on_another_process_after_kill9_continues_its_trace(
    tmp_path: Path, fake_model_server: FakeModelServer, receiver: OtlpReceiver
) -> None:
    url = postgres_url()
    wipe(url)
    fake = fake_model_server
    fake.model.reset()
    env = server_env(
        tmp_path,
        fake.base_url,
        DATABASE_URL=url,
        EXECUTOR="inline",
        LEASE_SECONDS="4",
        **otel_env(receiver),
    )
    a = Server(tmp_path, {**env, "OTEL_RESOURCE_ATTRIBUTES": "planact.test.process=a"})
    b = Server(tmp_path, {**env, "OTEL_RESOURCE_ATTRIBUTES": "planact.test.process=b"})
    a.start()
    b.start()
    try:
        fake.script(
            {"stage": "planning", "content": plan_reply("Count")},
            {"stage": "thinking", "content": run("echo ran"), "hold": "in-flight"},
            {"stage": "thinking", "content": run("echo ran")},
            {"stage": "thinking", "content": finish("counted")},
        )
        ids = start_json(a, {"goal": "count"}).json()
        rid, cid = ids["run_id"], ids["conversation_id"]

        def from_process(name: str) -> list[dict[str, Any]]:
            return [
                s
                for s in receiver.all()
                if s["resource"].get("planact.test.process") == name
                and s["name"].startswith("chat ")
            ]

        wait_for(lambda: sum(c["stage"] == "thinking" for c in fake.model.calls) == 1)
        # the planning call's span was exported by the first owner before it died
        first = wait_for(lambda: from_process("a"), what="the first owner's model span")
        a.kill9()
        _, end = follow(b, rid)
        assert end is not None and end["status"] == "completed"

        def resumed_part() -> list[dict[str, Any]] | None:
            spans = [
                s
                for s in receiver.all()
                if s["resource"].get("planact.test.process") == "b"
                and s["name"] not in ("GET", "POST")  # its HTTP requests: traces of their own
            ]
            names = [s["name"] for s in spans]
            return (
                spans
                if "run resumed" in names and names.count("chat openai/fake-model") >= 2
                else None
            )

        second = wait_for(resumed_part, what="the resumed run's spans")
        scrape = httpx.get(f"{b.url}/metrics", timeout=30).text  # b went on with it once
        assert "planact_resumes_total 1.0" in scrape.splitlines()
        assert 'planact_runs_total{status="completed"} 1.0' in scrape.splitlines()
    finally:
        for name in list(fake.model.holds):
            fake.release(name)
        a.stop()
        b.stop()
    engine = create_engine(url)
    with engine.connect() as conn:
        stored = conn.execute(
            text("SELECT trace_context FROM runs WHERE id = :r"), {"r": rid}
        ).scalar()
    engine.dispose()
    context = parse_stored(stored)
    assert context is not None
    trace_id = format(context.trace_id, "032x")
    assert {s["trace_id"] for s in first} == {trace_id}
    assert {s["trace_id"] for s in second} == {trace_id}  # the same trace, continued
    (resumed,) = [s for s in second if s["name"] == "run resumed"]
    assert resumed["parent"] == format(context.span_id, "016x")  # under the run's root span
    assert resumed["attributes"]["planact.run_id"] == rid
    assert cid


def test_traces_are_off_without_an_endpoint() -> None:
    assert not wanted({})
    assert not wanted({"OTEL_SERVICE_NAME": "planact"})
    assert wanted({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"})
    assert wanted({"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://collector:4318/v1/traces"})
    disabled = {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_SDK_DISABLED": "true"}
    assert not wanted(disabled)
    no_traces = {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_TRACES_EXPORTER": "none"}
    assert not wanted(no_traces)


@pytest.mark.parametrize(
    "stored", [None, "", "nothex-0000000000000001", "0" * 32 + "-" + "0" * 16, "abc-def", "x"]
)
def test_a_missing_or_malformed_stored_context_starts_a_new_trace(stored: str | None) -> None:
    assert parse_stored(stored) is None
