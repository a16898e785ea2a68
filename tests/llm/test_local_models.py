"""The local-model forms of the README, exercised as written against a fake that answers as
Ollama does on both of its APIs (tests/fakeollama.py) and against the fake model as
llama-server answers (its OpenAI-compatible API); a wrong path is named as such, with the
URL called, and the model check says whether the model answered sensibly."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from starlette.testclient import TestClient

from backend.app import create_app
from tests.fakellm import FakeModelServer
from tests.fakeollama import FakeOllamaServer
from tests.support.settings import make_settings

README = (Path(__file__).parents[2] / "README.md").read_text()
LOCAL = re.compile(r"LLM_MODEL=(\S+)\s+LLM_BASE_URL=(http://127\.0\.0\.1:(11434|8080)\S*)")


@pytest.fixture(scope="module")
def ollama() -> Iterator[FakeOllamaServer]:
    server = FakeOllamaServer().start()
    yield server
    server.stop()


def check(tmp_path: Path, model: str, base_url: str) -> dict[str, Any]:
    settings = make_settings(tmp_path, llm_model=model, llm_base_url=base_url, llm_max_retries=0)
    with TestClient(create_app(settings)) as client:
        answer: dict[str, Any] = client.post("/api/llm/check", json={}).json()
    return answer


def test_the_readmes_local_model_lines_work_as_written(
    tmp_path: Path, ollama: FakeOllamaServer, fake_model: FakeModelServer
) -> None:
    lines = LOCAL.findall(README)
    assert {port for _, _, port in lines} == {"11434", "8080"}  # Ollama and llama-server
    assert any(u.endswith("/v1") for _, u, p in lines if p == "11434")  # both Ollama APIs
    assert any(not u.endswith("/v1") for _, u, p in lines if p == "11434")
    for model, url, port in lines:
        server = ollama if port == "11434" else fake_model
        server.model.reset()
        server.script({"stage": "check", "content": "42"})
        base = url.replace(f"127.0.0.1:{port}", f"127.0.0.1:{server.port}")
        answer = check(tmp_path, model, base)
        assert answer["ok"] is True, (model, url, answer)
        (call,) = server.model.calls
        assert call["max_tokens"]  # bounded on every API
        native = call.get("path", "").startswith("/api/")
        assert native is (not url.endswith("/v1"))  # Ollama's own API without /v1


def test_an_ollama_id_with_ollamas_v1_url_goes_to_its_openai_api(
    tmp_path: Path, ollama: FakeOllamaServer
) -> None:
    """The README's old line (`ollama/…` with `…:11434/v1`) went to litellm's native client,
    which posted to /v1/api/generate: 404 on Ollama too."""
    ollama.model.reset()
    ollama.script({"stage": "check", "content": "42"})
    assert check(tmp_path, "ollama/qwen2.5-coder", ollama.base_url)["ok"] is True
    (call,) = ollama.model.calls
    assert call["model"] == "qwen2.5-coder"
    assert call["path"].endswith("/chat/completions")  # the /v1 API, not /api/…


@pytest.mark.parametrize(
    ("model", "path", "called"),
    [
        ("openai/qwen2.5-coder", "", "/chat/completions"),  # an OpenAI-compatible URL sans /v1
        ("ollama_chat/qwen2.5-coder", "/ollama", "/ollama/api/chat"),  # a wrong native URL
    ],
)
def test_a_wrong_path_is_named_with_the_url_not_blamed_on_the_model(
    tmp_path: Path, ollama: FakeOllamaServer, model: str, path: str, called: str
) -> None:
    answer = check(tmp_path, model, ollama.root_url + path)
    assert answer["ok"] is False
    assert answer["error"].startswith(
        f"The model server has no {ollama.root_url}{called} (HTTP 404 for the path, not for "
        "the model): check LLM_BASE_URL"
    )
    assert "check LLM_MODEL" not in answer["error"]


@pytest.mark.parametrize("base", ["base_url", "root_url"])
def test_a_model_the_server_lacks_is_named_as_the_model(
    tmp_path: Path, ollama: FakeOllamaServer, base: str
) -> None:
    model = "openai/nope" if base == "base_url" else "ollama_chat/nope"
    answer = check(tmp_path, model, getattr(ollama, base))
    assert answer["ok"] is False
    assert re.match(r"Model '(ollama_chat/)?nope' was not found at http://", answer["error"])
    assert "nope" in answer["error"].split("said:", 1)[1]  # what the server said, quoted


def test_the_check_says_when_the_model_answered_but_not_sensibly(
    tmp_path: Path, ollama: FakeOllamaServer
) -> None:
    ollama.model.reset()
    ollama.script({"stage": "check", "content": "Hello! How can I help you today?"})
    answer = check(tmp_path, "ollama_chat/qwen2.5-coder", ollama.root_url)
    assert answer["ok"] is False and answer["answer"] == "Hello! How can I help you today?"
    assert answer["error"].startswith("The model answered, but not what it was asked")
