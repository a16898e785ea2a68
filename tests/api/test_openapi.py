"""GET /api/openapi.json: an OpenAPI 3.1 document of every /api route, built from what each
route declares and from the pydantic models it validates with; GET /api/docs renders it
with assets served by planact."""

from __future__ import annotations

import json
import re
from typing import Any

import jsonschema
import pytest
from openapi_spec_validator import validate
from pydantic import TypeAdapter
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route
from starlette.testclient import TestClient

from backend.actions.registry.wire import payloads, wire_schema
from backend.api.models import STREAM_EVENTS, ErrorBody, StartRunBody
from backend.app import create_app
from backend.config import Settings
from backend.llm.testing import ScriptedLLM
from backend.openapi import ApiInfo, api_path, build_document, operation_of
from tests.agent.scripts import finish, plan_reply, run
from tests.openapi_check import check_events
from tests.sse_client import iter_events
from tests.support.asgi import client_for
from tests.support.settings import make_settings

ERROR_REF = {"$ref": "#/components/schemas/ErrorBody"}


@pytest.fixture
def client(settings: Settings) -> Any:
    with TestClient(create_app(settings)) as c:
        yield c


@pytest.fixture
def document(client: TestClient) -> dict[str, Any]:
    resp = client.get("/api/openapi.json")
    assert resp.status_code == 200
    assert resp.headers["content-type"] == "application/json"
    found: dict[str, Any] = resp.json()
    return found


def test_the_document_is_valid_openapi_3_1(document: dict[str, Any]) -> None:
    assert document["openapi"].startswith("3.1.")
    validate(document)  # raises on any violation of the specification


def test_every_api_route_is_in_the_document_with_its_answers(
    client: TestClient, document: dict[str, Any]
) -> None:
    walked = 0
    for route in client.app.routes:  # type: ignore[attr-defined]
        if not isinstance(route, Route) or not route.path.startswith("/api/"):
            continue
        op = operation_of(route.endpoint)  # raises for a route that declares nothing
        if op is None:
            assert route.path == "/api/{rest:path}"  # the one catch-all left out
            continue
        for method in route.methods or ():
            if method == "HEAD":
                continue
            walked += 1
            entry = document["paths"][api_path(route.path)][method.lower()]
            statuses = {int(s) for s in entry["responses"]}
            assert any(200 <= s < 300 for s in statuses), (method, route.path)
            assert 400 in statuses  # a Host not in ALLOWED_HOSTS, at least
            if not op.public:
                assert 401 in statuses and {"bearer": []} in entry["security"]
            if method != "GET":
                assert 403 in statuses  # a foreign origin
            body = entry.get("requestBody", {}).get("content", {})
            if "application/json" in body:
                assert {413, 415} <= statuses, (method, route.path)
            for status in statuses - {200, 201, 202, 503}:
                content = entry["responses"][str(status)]["content"]
                assert content["application/json"]["schema"] == ERROR_REF
            for name in route.param_convertors:
                assert {"name": name, "in": "path"}.items() <= _param(entry, name).items()
    assert walked >= 20
    # every link names an operation of the document, with parameters it has
    ids = {e["operationId"]: e for item in document["paths"].values() for e in item.values()}
    links = [
        link
        for item in document["paths"].values()
        for e in item.values()
        for r in e["responses"].values()
        for link in r.get("links", {}).values()
    ]
    assert len(links) >= 10
    for link in links:
        target = ids[link["operationId"]]
        assert set(link["parameters"]) <= {p["name"] for p in target["parameters"]}


def _param(entry: dict[str, Any], name: str) -> dict[str, Any]:
    found: dict[str, Any] = next(p for p in entry["parameters"] if p["name"] == name)
    return found


def test_a_route_that_declares_nothing_cannot_be_built_into_the_document() -> None:
    async def secret(_request: Request) -> Response:
        return Response()

    info = ApiInfo("t", "1", "", ErrorBody, {})
    with pytest.raises(LookupError, match="secret"):
        build_document([Route("/api/secret", secret)], info)
    # the server's own document leaves it out (and says so) rather than failing
    assert build_document([Route("/api/secret", secret)], info, strict=False)["paths"] == {}


def test_request_bodies_are_the_models_the_routes_validate_with(
    client: TestClient, document: dict[str, Any]
) -> None:
    entry = document["paths"]["/api/agent/run"]["post"]
    ref = entry["requestBody"]["content"]["application/json"]["schema"]["$ref"]
    schema = TypeAdapter(StartRunBody).json_schema(
        mode="validation", ref_template="#/components/schemas/{model}"
    )
    assert document["components"]["schemas"][ref.rsplit("/", 1)[1]] == schema
    modes = schema["properties"]["mode"]["enum"]
    # a value the document does not allow is refused by the same model, naming the field
    resp = client.post("/api/agent/run", json={"goal": "hi", "mode": "bogus"})
    assert resp.status_code == 400 and "bogus" not in modes
    assert resp.json()["error"]["message"].startswith("'mode':")
    resp = client.post("/api/agent/run", json={"goal": ["not", "text"]})
    assert resp.status_code == 400
    assert resp.json()["error"]["message"].startswith("'goal':")


def test_a_messages_meta_json_items_are_the_payload_models(document: dict[str, Any]) -> None:
    schemas = document["components"]["schemas"]
    message = schemas["Message"]
    assert message["properties"]["meta"] == {"$ref": "#/components/schemas/Meta"}
    items = schemas["Meta"]["properties"]["json"]["items"]
    assert items == {"$ref": "#/components/schemas/MetaItem"}
    named = {
        ref["$ref"].removeprefix("#/components/schemas/") for ref in schemas["MetaItem"]["anyOf"]
    }
    models = {m.__name__ for kind_models in payloads().values() for m in kind_models}
    assert named == models | {"UnknownItem"}
    # the same schema as the web UI's types are made of (backend/messages/schema.py)
    wire = wire_schema()["$defs"]
    for name in [*named, "MetaPayloads", "Meta"]:
        text = json.dumps(schemas[name]).replace("#/components/schemas/", "#/$defs/")
        assert json.loads(text) == wire[name], name
    # an approval as the server writes it is an ApprovalRequest, a bad one is not
    approval = {
        "action_type": "terminal_run",
        "class": "terminal",
        "params": {"command": "ls"},
        "digest": "sha256:" + "0" * 64,
        "shown": {"whole": True, "note": "", "lines": 1, "chars": 2},
    }
    as_request = {
        "$ref": "#/components/schemas/ApprovalRequest",
        "components": document["components"],
    }
    jsonschema.validate(approval, as_request)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({**approval, "digest": 7}, as_request)


def test_a_given_schema_replaces_only_a_model_the_document_names() -> None:
    def given() -> dict[str, Any]:
        return {
            "type": "object",
            "properties": {"detail": {"$ref": "#/$defs/Detail"}},
            "$defs": {"Detail": {"type": "string"}},
        }

    info = ApiInfo("t", "1", "", ErrorBody, {}, schemas={"ErrorBody": given, "Unused": given})
    components = build_document([], info)["components"]["schemas"]
    assert components["ErrorBody"] == {
        "type": "object",
        "properties": {"detail": {"$ref": "#/components/schemas/Detail"}},
    }
    assert components["Detail"] == {"type": "string"}
    assert "Unused" not in components


def test_security_schemes_bearer_and_access_token_on_get_only(document: dict[str, Any]) -> None:
    schemes = document["components"]["securitySchemes"]
    assert schemes["bearer"] == {**schemes["bearer"], "type": "http", "scheme": "bearer"}
    assert schemes["accessToken"]["in"] == "query"
    assert schemes["accessToken"]["name"] == "access_token"
    for item in document["paths"].values():
        for method, entry in item.items():
            if {"accessToken": []} in entry["security"]:
                assert method == "get"
    assert document["paths"]["/api/health"]["get"]["security"] == []
    assert document["paths"]["/api/ready"]["get"]["security"] == []


def test_the_stream_events_are_described_and_a_real_stream_matches_them(
    settings: Settings, document: dict[str, Any]
) -> None:
    stream = document["paths"]["/api/agent/run"]["post"]["responses"]["200"]
    described = stream["content"]["text/event-stream"]["schema"]["x-events"]
    assert set(described) == set(STREAM_EVENTS) == {"message", "delta", "end"}
    assert described["message"] == {"$ref": "#/components/schemas/Message"}
    llm = ScriptedLLM(
        [
            ("planning", plan_reply("Say hi", prose="On it.")),
            ("thinking", run("echo hi") + "\n" + finish("Said hi.")),
        ]
    )
    with (
        client_for(settings, llm) as c,
        c.stream("POST", "/api/agent/run", json={"goal": "say hi"}) as resp,
    ):
        assert resp.status_code == 200
        events = [(ev.event, ev.json) for ev in iter_events(resp.iter_lines())]
    names = [name for name, _data in events]
    assert names[-1] == "end" and "message" in names
    check_events(document, "/api/agent/run", "post", events)
    with pytest.raises(jsonschema.ValidationError):  # the check itself can fail
        check_events(document, "/api/agent/run", "post", [("end", {**events[-1][1], "status": 1})])


def test_docs_page_uses_only_assets_served_by_planact(client: TestClient) -> None:
    page = client.get("/api/docs")
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    assert "script-src 'self'" in page.headers["content-security-policy"]
    links = re.findall(r'(?:src|href)="([^"]+)"', page.text)
    assert links and all(link.startswith("/api/docs/") for link in links)
    assert "<script>" not in page.text  # no inline script: the policy would block it
    for link in links:
        asset = client.get(link)
        assert asset.status_code == 200, link
        assert len(asset.content) > 0
    init = client.get("/api/docs/init.js")
    assert "/api/openapi.json" in init.text and "SwaggerUIBundle" in init.text
    bundle = client.get("/api/docs/assets/swagger-ui-bundle.js")
    assert bundle.headers["content-type"].startswith("text/javascript") or bundle.headers[
        "content-type"
    ].startswith("application/javascript")
    assert client.get("/api/docs/assets/index.html").status_code == 404
    assert client.get("/api/docs/assets/..%2f..%2f__init__.py").status_code == 404


def test_document_and_docs_need_no_token_the_api_does(tmp_path: Any) -> None:
    settings = make_settings(tmp_path, auth_token="s3cret")
    with TestClient(create_app(settings)) as c:
        assert c.get("/api/openapi.json").status_code == 200
        assert c.get("/api/docs").status_code == 200
        assert c.get("/api/docs/assets/swagger-ui.css").status_code == 200
        assert c.get("/api/settings").status_code == 401
