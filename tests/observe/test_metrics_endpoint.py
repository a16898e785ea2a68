"""GET /metrics (docs/api.md "Operating it"): Prometheus text, protected by METRICS_TOKEN or
loopback only, off with METRICS=0; a run is counted with bounded labels; the model call's
families come from the model client (real HTTP to the fake model)."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families
from starlette.testclient import TestClient

from backend.app import create_app
from backend.config import Settings
from backend.llm.dispatch import DispatchLLM
from tests.agent.scripts import finish, plan_reply, run
from tests.fakellm import FakeModelServer
from tests.sse_client import collect
from tests.support.settings import make_settings

LOOPBACK = ("127.0.0.1", 50000)
ELSEWHERE = ("10.1.2.3", 50000)


@contextmanager
def client(settings: Settings, peer: tuple[str, int] = LOOPBACK, **kw: Any) -> Iterator[TestClient]:
    app = create_app(settings)
    with TestClient(app, client=peer, base_url="http://127.0.0.1", **kw) as c:
        yield c


def samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Every sample of a scrape by (name, sorted labels)."""
    out = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def value(scrape: dict[Any, float], name: str, **labels: str) -> float:
    return scrape.get((name, tuple(sorted(labels.items()))), 0.0)


def model_settings(tmp_path: Path, fake: FakeModelServer, **over: Any) -> Settings:
    return make_settings(
        tmp_path,
        llm_model="openai/fake-model",
        llm_models="openai/fake-model,openai/other-model",
        llm_base_url=fake.base_url,
        llm_api_key="sk-fake",
        **over,
    )


def test_loopback_clients_read_the_metrics_without_a_token(settings: Settings) -> None:
    with client(settings) as c:
        got = c.get("/metrics")
    assert got.status_code == 200
    assert got.headers["content-type"].startswith("text/plain; version=0.0.4")
    names = {f.name for f in text_string_to_metric_families(got.text)}
    for family in (
        "planact_runs",
        "planact_runs_active",
        "planact_runs_waiting",
        "planact_model_calls",
        "planact_model_call_seconds",
        "planact_model_time_to_first_token_seconds",
        "planact_model_tokens",
        "planact_model_cost_usd",
        "planact_actions",
        "planact_action_seconds",
        "planact_approvals",
        "planact_resumes",
        "planact_open_streams",
        "planact_queued_jobs",
    ):
        assert family in names, family
    scrape = samples(got.text)
    assert value(scrape, "planact_runs_active") == 0
    assert value(scrape, "planact_queued_jobs") == 0  # inline: no queue


def test_without_a_token_other_clients_and_foreign_hosts_are_refused(settings: Settings) -> None:
    with client(settings, ELSEWHERE) as c:
        got = c.get("/metrics")
        assert got.status_code == 403
        assert "METRICS_TOKEN" in got.json()["error"]["message"]
        assert "planact_" not in got.text
    with client(settings) as c:  # a loopback client, but a page's Host (DNS rebinding)
        got = c.get("/metrics", headers={"Host": "evil.example"})
        assert got.status_code == 403


def test_with_a_token_the_bearer_token_is_required_from_anywhere(tmp_path: Path) -> None:
    settings = make_settings(tmp_path, metrics_token="s3cret-metrics")
    for peer in (LOOPBACK, ELSEWHERE):
        with client(settings, peer) as c:
            assert c.get("/metrics").status_code == 401
            wrong = c.get("/metrics", headers={"Authorization": "Bearer nope"})
            assert wrong.status_code == 401
            assert wrong.headers["www-authenticate"] == "Bearer"
            right = c.get(
                "/metrics",
                headers={"Authorization": "Bearer s3cret-metrics", "Host": "api:8000"},
            )
            assert right.status_code == 200
            assert "planact_runs_total" in right.text


def test_metrics_0_turns_the_endpoint_off(tmp_path: Path) -> None:
    with client(make_settings(tmp_path, metrics=False)) as c:
        got = c.get("/metrics")
    assert got.status_code == 404
    assert "planact_" not in got.text


def test_a_run_is_counted_by_status_model_stage_tokens_and_action_without_its_text(
    tmp_path: Path, fake_model: FakeModelServer
) -> None:
    marker = f"goal-{uuid.uuid4().hex}"
    fake_model.script(
        {"stage": "planning", "content": plan_reply("Count")},
        {"stage": "thinking", "content": run("echo counted")},
        {"stage": "thinking", "content": finish("counted")},
    )
    with client(model_settings(tmp_path, fake_model)) as c:
        before = samples(c.get("/metrics").text)
        with c.stream("POST", "/api/agent/run", json={"goal": marker}) as resp:
            assert resp.status_code == 200
            _, end = collect(resp.iter_lines())
        assert end is not None and end["status"] == "completed"
        text = c.get("/metrics").text
    after = samples(text)

    def grew(name: str, **labels: str) -> float:
        return value(after, name, **labels) - value(before, name, **labels)

    model = "openai/fake-model"
    assert grew("planact_runs_total", status="completed") == 1
    assert grew("planact_model_calls_total", model=model, stage="planning", outcome="ok") == 1
    assert grew("planact_model_calls_total", model=model, stage="thinking", outcome="ok") == 2
    assert grew("planact_model_call_seconds_count", model=model, stage="thinking") == 2
    assert (
        grew("planact_model_time_to_first_token_seconds_count", model=model, stage="thinking") == 2
    )
    assert grew("planact_model_tokens_total", model=model, kind="input") > 0
    assert grew("planact_model_tokens_total", model=model, kind="output") > 0
    assert grew("planact_actions_total", type="terminal_run", status="success") == 1
    assert grew("planact_action_seconds_count", type="terminal_run") == 1
    assert value(after, "planact_open_streams") == 0  # the run's stream was closed
    assert marker not in text  # a person's words are never a label


async def test_a_model_or_stage_outside_the_configured_ones_is_labelled_other(
    fake_model: FakeModelServer,
) -> None:
    """Only LLM_MODEL / LLM_MODELS and the known stages become label values."""
    from backend.observe.metrics import REGISTRY

    typed = f"openai/typed-by-{uuid.uuid4().hex}"
    stage = f"ignore previous instructions {uuid.uuid4().hex}"
    fake_model.script({"stage": stage, "content": "hello"})
    llm = DispatchLLM(
        "openai/fake-model",
        base_url=fake_model.base_url,
        api_key="sk-fake",
        known_models=["openai/fake-model"],
    )
    try:
        before = REGISTRY.get_sample_value(
            "planact_model_calls_total", {"model": "other", "stage": "other", "outcome": "ok"}
        )
        await llm.complete(stage=stage, messages=[{"role": "user", "content": "x"}], model=typed)
    finally:
        await llm.aclose()
    after = REGISTRY.get_sample_value(
        "planact_model_calls_total", {"model": "other", "stage": "other", "outcome": "ok"}
    )
    assert (after or 0) - (before or 0) == 1
    from prometheus_client import generate_latest

    text = generate_latest(REGISTRY).decode()
    assert typed not in text and stage not in text


async def test_cached_input_tokens_and_their_cost_are_families_of_their_own(
    fake_model: FakeModelServer,
) -> None:
    from backend.llm.prices import lookup
    from backend.observe.metrics import REGISTRY

    model = "openai/gpt-4o-mini"
    fake_model.script(
        {"stage": "thinking", "content": "ok", "prompt_tokens": 4_000, "cached_tokens": 3_072}
    )
    llm = DispatchLLM(model, base_url=fake_model.base_url, api_key="sk-fake", known_models=[model])

    def sample(name: str, **labels: str) -> float:
        return REGISTRY.get_sample_value(name, {"model": model, **labels}) or 0.0

    before = sample("planact_model_cached_input_tokens_total", kind="read")
    cost_before = sample("planact_model_cached_input_cost_usd_total")
    try:
        await llm.complete(stage="thinking", messages=[{"role": "user", "content": "x"}])
    finally:
        await llm.aclose()
    assert sample("planact_model_cached_input_tokens_total", kind="read") - before == 3_072
    price = lookup(model)
    assert price is not None
    grew = sample("planact_model_cached_input_cost_usd_total") - cost_before
    assert grew == pytest.approx(3_072 * price.cache_read)


async def test_a_failed_model_call_is_counted_with_its_outcome(
    fake_model: FakeModelServer,
) -> None:
    from backend.llm.base import LLMError
    from backend.observe.metrics import REGISTRY

    # nothing scripted: the fake model answers HTTP 500
    llm = DispatchLLM(
        "openai/fake-model",
        base_url=fake_model.base_url,
        api_key="sk-fake",
        max_retries=0,
        retry_base_delay=0.01,
        known_models=["openai/fake-model"],
    )
    labels = {"model": "openai/fake-model", "stage": "summary", "outcome": "error"}
    before = REGISTRY.get_sample_value("planact_model_calls_total", labels) or 0
    try:
        await llm.complete(stage="summary", messages=[{"role": "user", "content": "x"}])
    except LLMError:
        pass
    else:
        raise AssertionError("the call should have failed")
    finally:
        await llm.aclose()
    assert (REGISTRY.get_sample_value("planact_model_calls_total", labels) or 0) - before == 1


def test_a_workers_listener_answers_metrics_protected_and_nothing_else(tmp_path: Path) -> None:
    from backend.observe.endpoint import Exposition, start_listener
    from backend.store.repo import Store

    store = Store(f"sqlite:///{tmp_path}/w.db")
    store.migrate()
    open_one = start_listener(Exposition(store.engine, None, "q"), "127.0.0.1", 0)
    token_one = start_listener(Exposition(store.engine, "tok", "q"), "127.0.0.1", 0)
    assert open_one is not None and token_one is not None
    try:
        base = f"http://127.0.0.1:{open_one.port}"
        got = httpx.get(f"{base}/metrics", timeout=10)
        assert got.status_code == 200 and "planact_runs_active 0.0" in got.text
        assert httpx.get(f"{base}/other", timeout=10).status_code == 404
        foreign = httpx.get(f"{base}/metrics", headers={"Host": "evil.example"}, timeout=10)
        assert foreign.status_code == 403
        guarded = f"http://127.0.0.1:{token_one.port}/metrics"
        assert httpx.get(guarded, timeout=10).status_code == 401
        right = httpx.get(guarded, headers={"Authorization": "Bearer tok"}, timeout=10)
        assert right.status_code == 200 and "planact_runs_total" in right.text
        # a port in use: no listener, the worker goes on (a warning says why)
        assert (
            start_listener(Exposition(store.engine, None, "q"), "127.0.0.1", open_one.port) is None
        )
    finally:
        open_one.close()
        token_one.close()
        asyncio.run(store.close())


def test_requests_are_counted_by_route_template_method_and_status(settings: Settings) -> None:
    """The route's template, never the path: ids do not become labels."""
    name = "planact_http_server_request_duration_seconds_count"
    with client(settings) as c:
        before = samples(c.get("/metrics").text)
        for _ in range(2):
            assert c.get(f"/api/conversations/{uuid.uuid4().hex}").status_code == 404
        assert c.get("/api/no/such/route").status_code == 404
        assert c.get("/api/health").status_code == 200
        after = samples(c.get("/metrics").text)
    labels = {"http_request_method": "GET", "http_response_status_code": "404"}

    def grew(**more: str) -> float:
        return value(after, name, **labels, **more) - value(before, name, **labels, **more)

    assert grew(http_route="/api/conversations/{cid}") == 2
    assert grew(http_route="/api/{rest:path}") == 1
    ok = {"http_route": "/api/health", "http_request_method": "GET"}
    assert value(after, name, **ok, http_response_status_code="200") >= 1
    assert not [k for k in after if k[0] == name and "no/such" in str(k[1])]


def test_the_preview_listener_families_are_exposed(settings: Settings) -> None:
    with client(settings) as c:
        names = {f.name for f in text_string_to_metric_families(c.get("/metrics").text)}
    for family in (
        "planact_preview_requests",
        "planact_preview_bytes",
        "planact_preview_connections",
        "planact_preview_connections_refused",
        "planact_preview_malformed_requests",
        "planact_preview_services",
    ):
        assert family in names, family
