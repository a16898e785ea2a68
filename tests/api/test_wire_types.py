"""The API's answers are their models, and the web UI's types are what the models generate.

The committed JSON Schema (frontend/src/lib/api.schema.json) must equal what
backend/api/wire_types.py gives, and the committed TypeScript (api.gen.ts) what the
generator (frontend/scripts/gen-types.mjs) makes of it: fix a failure with
`make frontend-types` and commit both files. The real answers of a run (settings, the
conversation listed and in detail, the stream's end, the model check) are checked to be
exactly their model's dump, byte for byte: nothing the model does not name reaches the UI.

The TypeScript half needs node and frontend/node_modules; without them it skips, unless
REQUIRE_BROWSER=1 (the UI's CI), where it fails.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel, TypeAdapter
from starlette.testclient import TestClient

from backend.actions.registry.wire import wire_schema
from backend.api.models import (
    ConversationDetail,
    ConversationSummary,
    EndEvent,
    ModelCheck,
    ServerSettings,
)
from backend.api.wire_types import ANSWERS, PAYLOADS, api_schema
from backend.app import create_app
from backend.config import Settings
from backend.llm.testing import ScriptedLLM
from backend.messages.schema import dumps
from backend.messages.tasks import PlanTask
from tests.agent.scripts import finish, plan_reply, run
from tests.sse_client import collect

FRONTEND = Path(__file__).resolve().parents[2] / "frontend"
SCHEMA = FRONTEND / "src" / "lib" / "api.schema.json"
TYPES = FRONTEND / "src" / "lib" / "api.gen.ts"
MESSAGE_TYPES = FRONTEND / "src" / "lib" / "message.gen.ts"
GENERATOR = FRONTEND / "scripts" / "gen-types.mjs"
FIX = "regenerate with `make frontend-types` and commit"


def test_the_committed_api_schema_is_what_the_models_give() -> None:
    assert SCHEMA.read_text(encoding="utf-8") == dumps(api_schema()), FIX


def test_the_api_schema_holds_every_answer_the_ui_reads() -> None:
    schema = api_schema()
    defs = schema["$defs"]
    assert {m.__name__ for m in (*ANSWERS, *PAYLOADS)} <= set(defs)
    # the run statuses the server sends, and only those (the UI guessed at more)
    assert defs["RunInfo"]["properties"]["status"]["enum"] == [
        "running",
        "waiting",
        "completed",
        "failed",
        "stopped",
    ]
    assert defs["EndEvent"]["properties"]["status"]["enum"] == ["completed", "failed", "stopped"]
    # the one usage shape: the conversation's totals and its `usage` by stage
    assert defs["ConversationDetail"]["properties"]["usage"] == {"$ref": "#/$defs/UsageSummary"}


def _node_missing() -> str | None:
    if shutil.which("node") is None:
        return "node is not installed"
    if not (FRONTEND / "node_modules" / "json-schema-to-typescript").is_dir():
        return "frontend/node_modules is not installed (make frontend)"
    return None


def test_the_committed_api_typescript_is_what_the_generator_makes(tmp_path: Path) -> None:
    reason = _node_missing()
    if reason:
        if os.environ.get("REQUIRE_BROWSER") == "1":
            pytest.fail(f"REQUIRE_BROWSER=1 but {reason}")
        pytest.skip(reason)
    schema = tmp_path / "api.schema.json"
    schema.write_text(dumps(api_schema()), encoding="utf-8")
    message_schema = tmp_path / "message.schema.json"
    message_schema.write_text(dumps(wire_schema()), encoding="utf-8")
    out = tmp_path / "api.gen.ts"
    command = [
        "node",
        str(GENERATOR),
        str(schema),
        str(out),
        "backend/api/wire_types.py",
        "--shared",
        f"{message_schema}=./message.gen",
    ]
    subprocess.run(command, cwd=FRONTEND, check=True, timeout=120)
    generated = out.read_text(encoding="utf-8")
    assert TYPES.read_text(encoding="utf-8") == generated, FIX
    messages = MESSAGE_TYPES.read_text(encoding="utf-8")
    for model in (*ANSWERS, *PAYLOADS):
        # each interface is generated once: here, or in message.gen.ts and imported here
        declared = f"export interface {model.__name__} {{"
        assert (declared in generated) != (declared in messages), model.__name__
        if declared in messages:
            assert re.search(rf"export type \{{[^}}]*\b{model.__name__}\b", generated)


# -- the real answers -----------------------------------------------------------------------


def exactly(model: Any, body: bytes, *, exclude_none: bool = False) -> Any:
    """``body`` parsed strictly as ``model`` (a model or a TypeAdapter's type), and
    ``body`` is that value's dump as the API writes JSON: no field more, none less, in
    the model's order (``exclude_none``: an answer that leaves out what is ``None``)."""
    adapter = TypeAdapter(model)
    value = adapter.validate_json(body, strict=True)
    dumped = adapter.dump_python(value, exclude_none=exclude_none)
    wire = json.dumps(dumped, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
    assert wire.encode() == body
    return value


@contextmanager
def client_for(settings: Settings, llm: ScriptedLLM) -> Iterator[TestClient]:
    with TestClient(create_app(settings, llm=llm)) as client:
        yield client


def test_the_answers_of_a_run_are_exactly_their_models(settings: Settings) -> None:
    llm = ScriptedLLM(
        [
            ("planning", plan_reply("Say hello", prose="On it.")),
            ("thinking", run("echo hello") + "\n" + finish("Said hello.")),
            ("check", "42"),
        ]
    )
    with client_for(settings, llm) as client:
        goal = {"goal": "Run a shell command that says hello", "mode": "agent"}
        with client.stream("POST", "/api/agent/run", json=goal) as resp:
            assert resp.status_code == 200
            _messages, end = collect(resp.iter_lines())
        assert end is not None
        ended = EndEvent.model_validate(end, strict=True)
        assert ended.model_dump() == end and ended.status == "completed"
        cid = ended.conversation_id

        detail: ConversationDetail = exactly(
            ConversationDetail, client.get(f"/api/conversations/{cid}").content
        )
        assert [r.run_id for r in detail.runs] == [ended.run_id]
        assert detail.runs[0].status == "completed" and detail.status == "completed"
        assert detail.usage.stages["planning"].calls == 1
        assert detail.total_tokens == detail.usage.total.total_tokens > 0
        assert detail.runs[0].total_tokens == detail.total_tokens

        # the plan's and each task message's meta.json: tasks exactly as PlanTask dumps them
        stored = client.get(f"/api/conversations/{cid}/messages").json()
        tasks = [
            task
            for m in stored
            if m["meta"]["action_type"] in ("plan", "task")
            for task in m["meta"]["json"]
        ]
        assert (
            tasks and [PlanTask.model_validate(t, strict=True).model_dump() for t in tasks] == tasks
        )
        assert {t["status"] for t in tasks} == {"pending", "running", "completed"}

        listed = exactly(list[ConversationSummary], client.get("/api/conversations").content)
        assert [c.conversation_id for c in listed] == [cid]

        shown: ServerSettings = exactly(ServerSettings, client.get("/api/settings").content)
        assert shown.model == settings.llm_model

        answer = client.post("/api/llm/check").content
        checked: ModelCheck = exactly(ModelCheck, answer, exclude_none=True)
        assert checked.ok is True


def test_a_model_that_is_not_the_wire_fails_the_check() -> None:
    """The check itself can fail: a field the model does not name, or another order."""

    class Pair(BaseModel):
        a: int
        b: int

    assert exactly(Pair, b'{"a":1,"b":2}') == Pair(a=1, b=2)
    with pytest.raises(AssertionError):
        exactly(Pair, b'{"a":1,"b":2,"c":3}')
    with pytest.raises(AssertionError):
        exactly(Pair, b'{"b":2,"a":1}')
