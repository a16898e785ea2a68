"""Which path serves which model id, and the ScriptedLLM's deltas."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from backend.llm.base import Completion, LLMConfigError
from backend.llm.dispatch import DispatchLLM
from backend.llm.providers import lean_endpoint
from backend.llm.testing import ScriptedLLM, split_deltas
from tests.fakellm import FakeModelServer


@pytest.mark.parametrize(
    ("model", "base_url", "url", "sent"),
    [
        ("openai/gpt-4o-mini", None, "https://api.openai.com/v1/chat/completions", "gpt-4o-mini"),
        (
            "openrouter/qwen/qwen3-coder",
            None,
            "https://openrouter.ai/api/v1/chat/completions",
            "qwen/qwen3-coder",
        ),
        ("openai/qwen2.5", "http://h:11434/v1/", "http://h:11434/v1/chat/completions", "qwen2.5"),
        ("qwen2.5-coder", "http://h/v1", "http://h/v1/chat/completions", "qwen2.5-coder"),
        ("qwen/qwen3-coder", "http://h/v1", "http://h/v1/chat/completions", "qwen/qwen3-coder"),
        ("hosted_vllm/m", "http://h/v1/chat/completions", "http://h/v1/chat/completions", "m"),
    ],
)
def test_openai_compatible_models_take_the_lean_path(
    model: str, base_url: str | None, url: str, sent: str
) -> None:
    endpoint = lean_endpoint(model, base_url, "k")
    assert endpoint is not None
    assert (endpoint.url, endpoint.model, endpoint.api_key) == (url, sent, "k")
    assert DispatchLLM(model, base_url=base_url).path() == "lean"


@pytest.mark.parametrize(
    ("model", "base_url"),
    [
        ("anthropic/claude-sonnet-4-5", None),
        ("anthropic/claude-sonnet-4-5", "http://proxy/v1"),
        ("gemini/gemini-2.5-pro", None),
        ("ollama/qwen2.5-coder", "http://127.0.0.1:11434"),
        ("bedrock/anthropic.claude-3", None),
        ("gpt-4o", None),  # bare ids without LLM_BASE_URL: litellm knows the provider
        ("hosted_vllm/m", None),  # needs LLM_BASE_URL: litellm says so
    ],
)
def test_other_providers_take_litellm(model: str, base_url: str | None) -> None:
    assert lean_endpoint(model, base_url, None) is None
    assert DispatchLLM(model, base_url=base_url).path() == "litellm"


def test_llm_client_litellm_sends_everything_through_litellm() -> None:
    llm = DispatchLLM("openai/gpt-4o-mini", client="litellm")
    assert llm.path() == "litellm" and llm.path("openrouter/x/y") == "litellm"


def test_the_provider_key_variable_is_used_when_no_key_is_set(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("OPENROUTER_API_KEY", "sk-or")
    endpoint = lean_endpoint("openrouter/a/b", None, None)
    assert endpoint is not None and endpoint.api_key == "sk-or"


def test_the_old_import_still_works() -> None:
    from backend.llm.client import LiteLLM
    from backend.llm.litellm_client import LiteLLM as Same

    assert LiteLLM is Same


async def test_scripted_llm_streams_deltas() -> None:
    llm = ScriptedLLM(
        [
            ("auto_reply", "Paris is the capital."),
            ("thinking", Completion(text="<finish/>", reasoning="done soon")),
            ("summary", "no deltas asked"),
        ]
    )
    got: list[tuple[str, str]] = []
    reply = await llm.complete(
        stage="auto_reply", messages=[], on_delta=lambda k, t: got.append((k, t))
    )
    assert [k for k, _ in got] == ["text"] * 3
    assert "".join(t for _, t in got) == reply.text == "Paris is the capital."
    got.clear()
    await llm.complete(stage="thinking", messages=[], on_delta=lambda k, t: got.append((k, t)))
    assert [k for k, _ in got] == ["reasoning"] * 3 + ["text"] * 3
    assert "".join(t for k, t in got if k == "reasoning") == "done soon"
    assert (await llm.complete(stage="summary", messages=[])).text == "no deltas asked"


@pytest.mark.parametrize("text", ["", "a", "ab", "abcdefg", "x" * 100])
def test_split_deltas_round_trips(text: str) -> None:
    parts = split_deltas(text, 3)
    assert "".join(parts) == text and len(parts) <= 3 and all(parts)


def test_prewarm_only_when_the_default_model_needs_litellm() -> None:
    assert DispatchLLM("openai/gpt-4o-mini").prewarm() is None
    assert DispatchLLM(None).prewarm() is None
    thread = DispatchLLM("anthropic/claude-sonnet-4-5").prewarm()
    assert thread is not None
    thread.join(120)
    assert not thread.is_alive()
    assert "litellm" in sys.modules


def test_make_llm_reads_the_deadline_settings(tmp_path: Path) -> None:
    from backend.llm.factory import make_llm
    from tests.support.settings import make_settings

    settings = make_settings(
        tmp_path,
        llm_model="openai/gpt-4o-mini",
        llm_timeout=7,
        llm_call_max_seconds=30,
        llm_client="litellm",
        llm_stream=False,
    )
    llm = make_llm(settings)
    assert isinstance(llm, DispatchLLM)
    assert llm.path() == "litellm"
    for client in (llm.lean, llm.litellm):
        assert (client.timeout, client.call_max_seconds, client.stream) == (7, 30, False)


@pytest.mark.parametrize("name", ["LLM_TIMEOUT", "LLM_CALL_MAX_SECONDS"])
def test_a_deadline_must_be_positive(monkeypatch: pytest.MonkeyPatch, name: str) -> None:
    from pydantic import ValidationError

    from backend.config import Settings

    monkeypatch.setenv(name, "0")
    with pytest.raises(ValidationError, match=name.lower()):
        Settings(_env_file=None)


# litellm builds a pydantic type lazily on this error path, and pydantic warns about it
@pytest.mark.filterwarnings("ignore:Item .* is using the `ReadOnly` qualifier:UserWarning")
async def test_litellm_without_a_key_is_a_config_error_not_retried(
    fake_model: FakeModelServer,
) -> None:
    llm = DispatchLLM("openai/fake", base_url=fake_model.base_url, client="litellm")
    with pytest.raises(LLMConfigError, match="LLM_API_KEY"):
        await llm.complete(stage="route", messages=[{"role": "user", "content": "x"}])
    assert fake_model.model.calls == []  # refused before any request


async def test_the_lean_path_needs_no_key_for_a_local_server(fake_model: FakeModelServer) -> None:
    fake_model.script({"stage": "route", "content": "{}"})
    llm = DispatchLLM("openai/fake", base_url=fake_model.base_url)
    try:
        assert (await llm.complete(stage="route", messages=[])).text == "{}"
    finally:
        await llm.aclose()


def test_litellm_imports_whole_after_an_import_that_failed_half_way() -> None:
    """An import of litellm that failed half-way (a prewarm thread's, say) leaves its
    submodules in sys.modules without the package; the next import then never bound them to
    it and every litellm call failed ("partially initialized module 'litellm' has no
    attribute 'utils'") for the rest of the process. In a process of its own: it breaks
    the interpreter's litellm on purpose."""
    script = (
        "import sys, litellm\n"
        "del sys.modules['litellm']  # what a failed import leaves: the submodules only\n"
        "from backend.llm.litellm_client import import_litellm\n"
        "module = import_litellm()\n"
        "print(module.utils.__name__, module.suppress_debug_info)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=240
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["litellm.utils", "True"]
