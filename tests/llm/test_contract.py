"""One contract for the LLM seam, run against both paths (the lean client, httpx over
aiohttp's connections, and litellm) through the app's DispatchLLM, with the fake model
server over real HTTP.

Where litellm behaves differently the test says so (see backend/llm/litellm_client.py).
"""

from __future__ import annotations

import socket
import time
from collections.abc import AsyncIterator, Callable
from typing import Any, Literal

import pytest

from backend.llm.base import (
    LLMConfigError,
    LLMError,
    LLMTimeoutError,
    LLMTruncatedError,
)
from backend.llm.dispatch import DispatchLLM
from backend.llm.output_limit import CHECK, DEFAULT, model_limit
from tests.fakellm import FakeModelServer
from tests.support.raw_http import answering

MSGS = [{"role": "user", "content": "hi"}]
Path_ = Literal["lean", "litellm"]

pytestmark = pytest.mark.parametrize("path", ["lean", "litellm"])


Make = Callable[..., DispatchLLM]


@pytest.fixture
async def make(request: pytest.FixtureRequest, fake_model: FakeModelServer) -> AsyncIterator[Make]:
    """``make(fake_or_url, path, **options)``: a DispatchLLM on that path, closed after.

    On the litellm path one call is made first: litellm's first calls in a process and
    event loop spend up to a second or more (on a busy machine) in set-up before the
    request leaves, which would eat the short deadlines these tests use."""
    if request.node.callspec.params.get("path") == "litellm":
        fake_model.script({"stage": "warm-up", "content": "ready"})
        warm = DispatchLLM(
            "openai/fake", api_key="sk-test", base_url=fake_model.base_url, client="litellm"
        )
        assert (await warm.complete(stage="warm-up", messages=MSGS)).text == "ready"
        fake_model.model.calls.clear()
    made: list[DispatchLLM] = []

    def factory(fake: FakeModelServer | str | None, path: Path_, **kw: Any) -> DispatchLLM:
        base_url = fake if isinstance(fake, str) or fake is None else fake.base_url
        options: dict[str, Any] = {"retry_base_delay": 0.01, **kw}
        llm = DispatchLLM(
            kw.pop("model", "openai/fake"),
            api_key="sk-test",
            base_url=base_url,
            client="auto" if path == "lean" else "litellm",
            **{k: v for k, v in options.items() if k != "model"},
        )
        if llm.model:
            assert llm.path() == path
        made.append(llm)
        return llm

    yield factory
    for llm in made:
        await llm.aclose()


class Deltas:
    def __init__(self) -> None:
        self.got: list[tuple[str, str]] = []

    def __call__(self, kind: str, text: str) -> None:
        self.got.append((kind, text))

    def joined(self, kind: str) -> str:
        return "".join(t for k, t in self.got if k == kind)

    def kinds(self) -> list[str]:
        """The kinds in order, runs collapsed: ["reasoning", "text"]."""
        out: list[str] = []
        for kind, _ in self.got:
            if not out or out[-1] != kind:
                out.append(kind)
        return out


@pytest.mark.parametrize("stream", [True, False])
async def test_text_usage_finish_and_stage_header(
    make: Make, fake_model: FakeModelServer, path: Path_, stream: bool
) -> None:
    fake_model.script(
        {"stage": "planning", "content": "x" * 300, "prompt_tokens": 9, "completion_tokens": 4}
    )
    got = await make(fake_model, path, stream=stream).complete(stage="planning", messages=MSGS)
    assert got.text == "x" * 300
    assert (got.prompt_tokens, got.completion_tokens) == (9, 4)
    assert got.finish_reason == "stop"
    assert got.model == "openai/fake"
    call = fake_model.model.calls[-1]
    assert call["stage"] == "planning" and call["stream"] is stream
    assert call["authorization"] == "Bearer sk-test"
    assert call["model"] == "fake"  # the provider prefix is not sent, as litellm does


@pytest.mark.parametrize("stream", [True, False])
async def test_reasoning_is_split_off(
    make: Make, fake_model: FakeModelServer, path: Path_, stream: bool
) -> None:
    fake_model.script(
        {"stage": "thinking", "content": "the answer", "reasoning": "first I think", "chunks": 4}
    )
    deltas = Deltas()
    got = await make(fake_model, path, stream=stream).complete(
        stage="thinking", messages=MSGS, on_delta=deltas
    )
    assert (got.reasoning, got.text) == ("first I think", "the answer")
    assert deltas.kinds() == ["reasoning", "text"]
    assert (deltas.joined("reasoning"), deltas.joined("text")) == (got.reasoning, got.text)


@pytest.mark.parametrize("stream", [True, False])
async def test_the_reasoning_field_variant(
    make: Make, fake_model: FakeModelServer, path: Path_, stream: bool
) -> None:
    # Ollama and OpenRouter name the field "reasoning", DeepSeek "reasoning_content"
    fake_model.script(
        {"stage": "thinking", "content": "ok", "reasoning": "hm", "reasoning_field": "reasoning"}
    )
    got = await make(fake_model, path, stream=stream).complete(stage="thinking", messages=MSGS)
    assert (got.reasoning, got.text) == ("hm", "ok")


async def test_on_delta_streams_every_piece_in_order(
    make: Make, fake_model: FakeModelServer, path: Path_
) -> None:
    text = "".join(f"word{i} " for i in range(200))
    fake_model.script({"stage": "auto_reply", "content": text, "chunks": 50})
    deltas = Deltas()
    got = await make(fake_model, path).complete(stage="auto_reply", messages=MSGS, on_delta=deltas)
    assert got.text == text
    assert deltas.kinds() == ["text"]
    assert len(deltas.got) == 50  # as the model sent them, not at the end in one piece
    assert deltas.joined("text") == text


@pytest.mark.parametrize("stream", [True, False])
async def test_native_tool_calls_are_assembled(
    make: Make, fake_model: FakeModelServer, path: Path_, stream: bool
) -> None:
    calls = [
        {
            "id": "c1",
            "type": "function",
            "function": {"name": "read_file", "arguments": '{"path": "a.txt"}'},
        },
        {
            "id": "c2",
            "type": "function",
            "function": {"name": "terminal_run", "arguments": '{"command": "ls -la /tmp"}'},
        },
    ]
    fake_model.script(
        {
            "stage": "thinking",
            "content": "",
            "tool_calls": calls,
            "finish_reason": "tool_calls",
            "tool_call_pieces": 4,
        }
    )
    got = await make(fake_model, path, stream=stream).complete(stage="thinking", messages=MSGS)
    assert got.finish_reason == "tool_calls"
    assert got.tool_calls is not None
    assert [(c["id"], c["function"]) for c in got.tool_calls] == [
        (c["id"], c["function"]) for c in calls
    ]


@pytest.mark.parametrize("status", [429, 500, 503])
async def test_transient_errors_are_retried(
    make: Make, fake_model: FakeModelServer, path: Path_, status: int
) -> None:
    fake_model.script(
        {"stage": "thinking", "status": status, "content": "busy"},
        {"stage": "thinking", "status": status, "content": "busy"},
        {"stage": "thinking", "content": "ok"},
    )
    got = await make(fake_model, path).complete(stage="thinking", messages=MSGS)
    assert got.text == "ok"
    assert len(fake_model.model.calls) == 3


async def test_retries_are_bounded(make: Make, fake_model: FakeModelServer, path: Path_) -> None:
    fake_model.script(*({"stage": "summary", "status": 503, "content": "down"},) * 3)
    with pytest.raises(LLMError, match="after 3 attempts"):
        await make(fake_model, path, max_retries=2).complete(stage="summary", messages=MSGS)
    assert len(fake_model.model.calls) == 3


@pytest.mark.parametrize("status", [401, 403])
async def test_rejected_key_is_a_config_error(
    make: Make, fake_model: FakeModelServer, path: Path_, status: int
) -> None:
    fake_model.script({"stage": "route", "status": status, "content": "invalid api key"})
    with pytest.raises(LLMConfigError, match="LLM_API_KEY") as err:
        await make(fake_model, path).complete(stage="route", messages=MSGS)
    assert "invalid api key" in str(err.value)
    assert len(fake_model.model.calls) == 1  # never retried


async def test_unknown_model_is_a_config_error(
    make: Make, fake_model: FakeModelServer, path: Path_
) -> None:
    fake_model.script({"stage": "route", "status": 404, "content": "model 'fake' not found"})
    with pytest.raises(LLMConfigError, match="LLM_MODEL"):
        await make(fake_model, path).complete(stage="route", messages=MSGS)
    assert len(fake_model.model.calls) == 1


async def test_bad_request_is_not_retried(
    make: Make, fake_model: FakeModelServer, path: Path_
) -> None:
    fake_model.script({"stage": "thinking", "status": 400, "content": "context too long"})
    with pytest.raises(LLMError, match="context too long") as err:
        await make(fake_model, path).complete(stage="thinking", messages=MSGS)
    assert not isinstance(err.value, LLMConfigError)
    assert len(fake_model.model.calls) == 1


async def test_missing_model_is_a_config_error(make: Make, path: Path_) -> None:
    llm = make(None, path, model=None)
    with pytest.raises(LLMConfigError, match="LLM_MODEL"):
        await llm.complete(stage="route", messages=MSGS)


async def test_unreachable_server_is_retried_then_fails(make: Make, path: Path_) -> None:
    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    llm = make(f"http://127.0.0.1:{port}/v1", path, max_retries=1)
    with pytest.raises(LLMError, match="after 2 attempts"):
        await llm.complete(stage="route", messages=MSGS)


# a reply cut off by the server mid-body: chunked, one event, then the connection closes
CUT_STREAM = (
    b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n"
    b"30\r\n"
    b'data: {"choices":[{"delta":{"content":"hi"}}]}\n\n'
    b"\r\n"
)


@pytest.mark.parametrize(
    "answer", [b"this is not HTTP\r\n\r\n", CUT_STREAM], ids=["not-http", "cut-mid-body"]
)
async def test_a_broken_answer_is_retried_then_fails(
    make: Make, path: Path_, answer: bytes
) -> None:
    """A server that answers something that is not HTTP, or hangs up in the middle of a
    streamed body: a transient error of the model's (retried), never another exception."""
    async with answering(answer) as server:
        llm = make(f"{server.url}/v1", path, max_retries=1)
        with pytest.raises(LLMError, match="after 2 attempts"):
            await llm.complete(stage="thinking", messages=MSGS)
    assert len(server.heads) == 2


# -- deadlines ---------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["comment", "empty"])
async def test_keep_alives_do_not_hold_a_call(
    make: Make, fake_model: FakeModelServer, path: Path_, kind: str
) -> None:
    """Seen before: a keep-alive every 5 s held a call for 300 s with LLM_TIMEOUT=10. Here the
    model sends keep-alives (comments, or chunks without content) every 50 ms and its
    first token only after 30 s: with a 1.5 s content timeout the call fails instead."""
    shape = {"content": "late", "first_token_delay": 30, "keepalive": 0.05, "keepalive_kind": kind}
    fake_model.script({"stage": "thinking", **shape}, {"stage": "thinking", **shape})
    with pytest.raises(LLMTimeoutError, match="LLM_TIMEOUT"):
        await make(fake_model, path, timeout=1.5).complete(stage="thinking", messages=MSGS)
    assert len(fake_model.model.calls) == 2  # one retry of a timeout, no more


@pytest.mark.parametrize("stream", [True, False])
async def test_a_silent_model_fails_after_one_retry(
    make: Make, fake_model: FakeModelServer, path: Path_, stream: bool
) -> None:
    """Seen before: a silent model took 4 x 120 s at the default settings. Timeouts are now
    retried once: default worst case 2 x LLM_TIMEOUT plus one backoff."""
    fake_model.script(*({"stage": "planning", "silent": True},) * 3)
    with pytest.raises(LLMTimeoutError, match=r"after 2 attempts.*no content for 1 s"):
        await make(fake_model, path, timeout=1, max_retries=3, stream=stream).complete(
            stage="planning", messages=MSGS
        )
    assert len(fake_model.model.calls) == 2


async def test_a_stream_that_stops_mid_reply_times_out(
    make: Make, fake_model: FakeModelServer, path: Path_
) -> None:
    shape = {"content": "abcdefgh" * 10, "chunks": 10, "hang_after": 3, "keepalive": 0.05}
    fake_model.script({"stage": "thinking", **shape}, {"stage": "thinking", **shape})
    deltas = Deltas()
    with pytest.raises(LLMTimeoutError):
        await make(fake_model, path, timeout=1).complete(
            stage="thinking", messages=MSGS, on_delta=deltas
        )
    assert len(fake_model.model.calls) == 2
    # 3 pieces arrived before the silence; the retry does not start the live text over
    assert len(deltas.got) == 3


async def test_the_call_deadline_cuts_a_slow_stream_and_is_not_retried(
    make: Make, fake_model: FakeModelServer, path: Path_
) -> None:
    # content every 50 ms keeps the idle timer happy; the hard deadline ends it
    fake_model.script(
        {"stage": "summary", "content": "z" * 400, "chunks": 400, "chunk_delay": 0.05},
        {"stage": "summary", "content": "never asked for"},
    )
    started = time.monotonic()
    with pytest.raises(LLMError, match="LLM_CALL_MAX_SECONDS") as err:
        await make(fake_model, path, timeout=5, call_max_seconds=2).complete(
            stage="summary", messages=MSGS
        )
    assert not isinstance(err.value, LLMTimeoutError)
    assert len(fake_model.model.calls) == 1
    assert time.monotonic() - started < 20  # 400 x 50 ms would be 20 s


# -- how a stream ends -------------------------------------------------------------------


async def test_a_stream_without_finish_reason_or_done_is_truncated(
    make: Make, fake_model: FakeModelServer, path: Path_
) -> None:
    """Seen before: a stream that closed cleanly with no finish reason and no [DONE] after one
    action was executed as if complete."""
    action = "<write_code><path>a.py</path><content>print(1)</content></write_code>"
    cut = {"stage": "thinking", "content": action, "truncate": True}
    fake_model.script(cut, cut)
    with pytest.raises(LLMTruncatedError, match=r"after 2 attempts.*cut off"):
        await make(fake_model, path, max_retries=1).complete(stage="thinking", messages=MSGS)
    assert len(fake_model.model.calls) == 2


async def test_a_truncated_stream_is_retried(
    make: Make, fake_model: FakeModelServer, path: Path_
) -> None:
    fake_model.script(
        {"stage": "thinking", "content": "partial", "truncate": True},
        {"stage": "thinking", "content": "whole reply"},
    )
    got = await make(fake_model, path).complete(stage="thinking", messages=MSGS)
    assert got.text == "whole reply"


async def test_a_retry_after_live_text_does_not_send_it_again(
    make: Make, fake_model: FakeModelServer, path: Path_
) -> None:
    """The live message showed "partial" and then the retry's text after it: a reader saw
    the reply start over inside one message."""
    fake_model.script(
        {"stage": "summary", "content": "partial", "truncate": True},
        {"stage": "summary", "content": "whole reply"},
    )
    deltas = Deltas()
    got = await make(fake_model, path).complete(stage="summary", messages=MSGS, on_delta=deltas)
    assert got.text == "whole reply"
    assert deltas.joined("text") == "partial"


async def test_a_retry_after_an_attempt_that_sent_nothing_streams_live(
    make: Make, fake_model: FakeModelServer, path: Path_
) -> None:
    fake_model.script(
        {"stage": "summary", "status": 503},
        {"stage": "summary", "content": "whole reply"},
    )
    deltas = Deltas()
    got = await make(fake_model, path).complete(stage="summary", messages=MSGS, on_delta=deltas)
    assert got.text == "whole reply"
    assert deltas.joined("text") == "whole reply"


async def test_a_finish_reason_without_done_is_complete(
    make: Make, fake_model: FakeModelServer, path: Path_
) -> None:
    fake_model.script({"stage": "thinking", "content": "all here", "done": False})
    got = await make(fake_model, path).complete(stage="thinking", messages=MSGS)
    assert (got.text, got.finish_reason) == ("all here", "stop")


async def test_identical_chunks_are_content(
    make: Make, fake_model: FakeModelServer, path: Path_
) -> None:
    """Seen before: 100 identical chunks in a row tripped litellm's repetition guard."""
    fake_model.script({"stage": "thinking", "content": "----" * 150, "chunk_size": 4})
    got = await make(fake_model, path).complete(stage="thinking", messages=MSGS)
    assert got.text == "----" * 150
    assert len(fake_model.model.calls) == 1


async def test_every_call_is_bounded_by_the_models_own_limit_else_8192(
    make: Make, fake_model: FakeModelServer, path: Path_
) -> None:
    known = model_limit("openai/gpt-4o-mini")
    assert known is not None and known != DEFAULT  # litellm's table knows it
    for model in ("openai/fake", "openai/gpt-4o-mini"):
        fake_model.script({"stage": "thinking", "content": "ok"})
        await make(fake_model, path, model=model).complete(stage="thinking", messages=MSGS)
    assert [c["max_tokens"] for c in fake_model.model.calls] == [DEFAULT, known]


async def test_llm_max_output_tokens_bounds_every_call_and_the_check_asks_for_little(
    make: Make, fake_model: FakeModelServer, path: Path_
) -> None:
    for stage, limit in (("planning", 300), ("check", 300), ("check", None)):
        fake_model.script({"stage": stage, "content": "ok"})
        llm = make(fake_model, path, max_output_tokens=limit)
        await llm.complete(stage=stage, messages=MSGS)
    assert [c["max_tokens"] for c in fake_model.model.calls] == [300, 300, CHECK]


async def test_a_reply_the_limit_cut_says_so(
    make: Make, fake_model: FakeModelServer, path: Path_
) -> None:
    fake_model.script({"stage": "thinking", "content": "<write_code>", "finish_reason": "length"})
    got = await make(fake_model, path).complete(stage="thinking", messages=MSGS)
    assert (got.text, got.finish_reason) == ("<write_code>", "length")
