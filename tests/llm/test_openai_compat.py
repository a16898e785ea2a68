"""The lean path's own behaviour, beyond the shared contract (tests/llm/test_contract.py)."""

from __future__ import annotations

import asyncio
import gzip
import json
import subprocess
import sys
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from backend.llm.base import LLMError, LLMTransientError
from backend.llm.openai_compat import YIELD_EVERY, OpenAICompatLLM, decode_chunk
from backend.llm.prices import lookup
from tests.fakellm import FakeModelServer
from tests.support.ports import free_port
from tests.support.raw_http import answering, ok_response

MSGS = [{"role": "user", "content": "hi"}]


@pytest.fixture
async def lean() -> AsyncIterator[list[OpenAICompatLLM]]:
    made: list[OpenAICompatLLM] = []
    yield made
    for llm in made:
        await llm.aclose()


def sse(*events: dict[str, Any] | str) -> bytes:
    out = []
    for event in events:
        data = event if isinstance(event, str) else json.dumps(event)
        out.append(f"data: {data}\n\n")
    return "".join(out).encode()


def chunk(content: str | None = None, finish: str | None = None) -> dict[str, Any]:
    delta = {"content": content} if content is not None else {}
    return {"choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}


def over(body: bytes, made: list[OpenAICompatLLM], **kw: Any) -> OpenAICompatLLM:
    """A client whose every request is answered with ``body`` at once, whole (the network
    boundary replaced by httpx's MockTransport: the reply is already in the buffer)."""

    def answer(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, content=body, headers={"content-type": "text/event-stream"})

    llm = OpenAICompatLLM(
        "openai/m",
        base_url="http://model.invalid/v1",
        retry_base_delay=0.01,
        transport=httpx.MockTransport(answer),
        **kw,
    )
    made.append(llm)
    return llm


async def test_a_buffered_stream_yields_to_the_event_loop(lean: list[OpenAICompatLLM]) -> None:
    """Seen before: a buffered reply was consumed without yielding (90-700 ms per reply, health
    p99 of seconds). Here 2000 chunks arrive in one block; another task must get turns."""
    n = 2000
    body = sse(*(chunk("ab") for _ in range(n)), chunk(finish="stop"), "[DONE]")
    turns = 0
    stop = asyncio.Event()

    async def other_task() -> None:
        nonlocal turns
        while not stop.is_set():
            turns += 1
            await asyncio.sleep(0)

    ticker = asyncio.create_task(other_task())
    await asyncio.sleep(0)
    start = turns
    got = await over(body, lean).complete(stage="thinking", messages=MSGS)
    during = turns - start
    stop.set()
    await ticker
    assert got.text == "ab" * n
    assert during >= n // YIELD_EVERY


async def test_done_without_a_finish_reason_is_complete(lean: list[OpenAICompatLLM]) -> None:
    body = sse(chunk("all"), chunk(" here"), "[DONE]")
    got = await over(body, lean).complete(stage="thinking", messages=MSGS)
    assert (got.text, got.finish_reason) == ("all here", None)


async def test_sse_details_crlf_comments_multiline_data_and_no_final_blank_line(
    lean: list[OpenAICompatLLM],
) -> None:
    event = json.dumps(chunk("two"), indent=1)  # pretty-printed: several data lines
    body = (
        b": OPENROUTER PROCESSING\r\n\r\n"
        b"event: message\r\nid: 1\r\ndata: "
        + json.dumps(chunk("one ")).encode()
        + b"\r\n\r\n"
        + "".join(f"data: {line}\n" for line in event.split("\n")).encode()
        + b"\n"
        + b"data: "
        + json.dumps(chunk(finish="stop")).encode()
    )
    got = await over(body, lean).complete(stage="thinking", messages=MSGS)
    assert (got.text, got.finish_reason) == ("one two", "stop")


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (sse(chunk("a"), "{not json"), "not JSON"),
        (sse(chunk("a")) + b'data: {"choices": "\xff"}\n\n', "not JSON"),  # not UTF-8
        (sse(chunk("a"), {"error": {"message": "overloaded"}}), "overloaded"),
    ],
)
async def test_a_broken_stream_is_retried_then_fails(
    lean: list[OpenAICompatLLM], body: bytes, message: str
) -> None:
    with pytest.raises(LLMTransientError, match=rf"after 2 attempts.*{message}"):
        await over(body, lean, max_retries=1).complete(stage="thinking", messages=MSGS)


@pytest.mark.parametrize(
    ("raw", "text"),
    [
        # JSON that the strict fast parser refuses and the standard one takes
        (b'{"choices": [{"delta": {"content": "a\\ud800b"}}]}', "a\ud800b"),  # lone surrogate
        (b'{"x": NaN, "choices": [{"delta": {"content": "nan"}}]}', "nan"),
        (b'{"x": 1e400, "choices": [{"delta": {"content": "inf"}}]}', "inf"),
        # an integer past 64 bits: the fast parser would make it a float
        (b'{"n": -9223372036854775809, "choices": [{"delta": {"content": "big"}}]}', "big"),
        (b'{"choices": [{"index": 18446744073709551616, "delta": {"content": "i"}}]}', "i"),
        # and what both take, escapes included
        (b'{"choices": [{"delta": {"content": "\\u00e9\\n\\"q\\" \xc3\xa9"}}]}', 'é\n"q" é'),
    ],
)
async def test_a_chunk_parses_to_what_the_standard_json_parser_makes_of_it(
    lean: list[OpenAICompatLLM], raw: bytes, text: str
) -> None:
    if b"-9223372036854775809" not in raw and b"18446744073709551616" not in raw:
        assert decode_chunk(raw) == json.loads(raw)
    body = b"data: " + raw + b"\n\n" + sse(chunk(finish="stop"))
    got = await over(body, lean).complete(stage="thinking", messages=MSGS)
    assert (got.text, got.finish_reason) == (text, "stop")


async def test_a_made_up_tool_call_number_is_taken_as_unnumbered(
    lean: list[OpenAICompatLLM],
) -> None:
    call = {"id": "c1", "function": {"name": "run", "arguments": "{}"}}
    body = sse(
        {"choices": [{"delta": {"tool_calls": [{**call, "index": 10**12}]}}]},
        {"choices": [{"delta": {"tool_calls": [{"index": 10**30, "function": {"name": ""}}]}}]},
        chunk(finish="tool_calls"),
    )
    got = await over(body, lean).complete(stage="thinking", messages=MSGS)
    assert got.tool_calls == [{"id": "c1", "type": "function", "function": call["function"]}]


async def test_a_lone_surrogate_in_the_history_is_sent(
    fake_model: FakeModelServer, lean: list[OpenAICompatLLM]
) -> None:
    fake_model.script({"stage": "thinking", "content": "fine"})
    llm = OpenAICompatLLM("openai/fake", base_url=fake_model.base_url)
    lean.append(llm)
    got = await llm.complete(stage="thinking", messages=[{"role": "user", "content": "a\ud800b"}])
    assert got.text == "fine"
    assert fake_model.model.calls[-1]["messages"][0]["content"] == "a\ud800b"


async def test_no_key_sends_no_authorization(
    fake_model: FakeModelServer, lean: list[OpenAICompatLLM]
) -> None:
    fake_model.script({"stage": "route", "content": "{}"})
    llm = OpenAICompatLLM("local-model", base_url=fake_model.base_url)
    lean.append(llm)
    await llm.complete(stage="route", messages=MSGS)
    call = fake_model.model.calls[-1]
    assert (call["authorization"], call["model"]) == ("", "local-model")


async def test_one_pooled_connection_serves_sequential_calls(
    fake_model: FakeModelServer, lean: list[OpenAICompatLLM]
) -> None:
    fake_model.script(*({"stage": "route", "content": "{}"},) * 3)
    llm = OpenAICompatLLM("openai/fake", base_url=fake_model.base_url)
    lean.append(llm)
    client = llm.client()
    for _ in range(3):
        await llm.complete(stage="route", messages=MSGS)
    assert llm.client() is client
    peers = {call["peer"] for call in fake_model.model.calls[-3:]}
    assert len(peers) == 1, peers  # one connection, kept open between the calls


def test_prices_come_from_the_local_table() -> None:
    assert lookup("openai/gpt-4o-mini") == lookup("gpt-4o-mini") != None  # noqa: E711
    assert lookup("openai/no-such-model-anywhere") is None


def test_the_lean_path_computes_cost_without_importing_litellm(
    fake_model: FakeModelServer,
) -> None:
    fake_model.script(
        {"stage": "route", "content": "{}", "prompt_tokens": 1000, "completion_tokens": 100}
    )
    code = f"""
import asyncio, sys
from backend.llm.dispatch import DispatchLLM
llm = DispatchLLM("openai/gpt-4o-mini", api_key="k", base_url={fake_model.base_url!r})
got = asyncio.run(llm.complete(stage="route", messages=[{{"role": "user", "content": "x"}}]))
print(repr(got.cost), "litellm" in sys.modules)
"""
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    cost, imported = out.stdout.split()
    found = lookup("gpt-4o-mini")
    assert found is not None
    assert float(cost) == pytest.approx(1000 * found.prompt + 100 * found.completion)
    assert imported == "False"


async def test_an_error_body_that_is_not_json_is_reported(lean: list[OpenAICompatLLM]) -> None:
    def answer(request: httpx.Request) -> httpx.Response:
        return httpx.Response(400, content=b"<html>Bad Gateway Config</html>")

    llm = OpenAICompatLLM(
        "openai/m", base_url="http://model.invalid/v1", transport=httpx.MockTransport(answer)
    )
    lean.append(llm)
    with pytest.raises(LLMError, match=r"HTTP 400.*Bad Gateway Config"):
        await llm.complete(stage="route", messages=MSGS)


@pytest.mark.parametrize(
    "bad",
    [
        {"choices": ["x"]},
        {"choices": [{"delta": {"tool_calls": ["x"]}}]},
        {"choices": [{"delta": {"tool_calls": [{"index": 0, "function": "x"}]}}]},
        [1, 2],
    ],
)
async def test_a_malformed_chunk_is_a_model_error_never_a_crash(
    lean: list[OpenAICompatLLM], bad: Any
) -> None:
    body = sse(chunk("a"), bad, chunk(finish="stop"))
    with pytest.raises(LLMTransientError, match="malformed chunk"):
        await over(body, lean, max_retries=0).complete(stage="thinking", messages=MSGS)


async def test_odd_but_harmless_fields_are_ignored(lean: list[OpenAICompatLLM]) -> None:
    body = sse(
        {"choices": [{"delta": {"content": ["part"]}}]},  # not text: skipped
        chunk("kept"),
        {"choices": [], "usage": {"prompt_tokens": "many", "completion_tokens": 3}},
        chunk(finish="stop"),
    )
    got = await over(body, lean).complete(stage="thinking", messages=MSGS)
    assert (got.text, got.prompt_tokens, got.completion_tokens) == ("kept", 0, 3)


@pytest.mark.parametrize(
    "body",
    [
        b"not json",
        b'{"choices": []}',
        b'{"choices": [{"message": "x"}]}',
        b'{"choices": [{"message": {"content": 5}}]}',
    ],
)
async def test_a_non_streamed_answer_that_is_not_a_completion_is_a_model_error(
    lean: list[OpenAICompatLLM], body: bytes
) -> None:
    llm = over(body, lean, max_retries=0, stream=False)
    with pytest.raises(LLMTransientError, match="not a chat completion"):
        await llm.complete(stage="thinking", messages=MSGS)


async def test_a_line_without_end_is_refused(
    lean: list[OpenAICompatLLM], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("backend.llm.openai_compat.MAX_LINE", 1000)
    body = sse(chunk("a")) + b"data: " + b"x" * 5000
    with pytest.raises(LLMTransientError, match="line longer than"):
        await over(body, lean, max_retries=0).complete(stage="thinking", messages=MSGS)


async def test_the_proxy_variables_send_the_call_through_the_proxy(
    monkeypatch: pytest.MonkeyPatch, lean: list[OpenAICompatLLM]
) -> None:
    """HTTP_PROXY is honoured as httpx honours it (the model's host is reachable only
    through the proxy here)."""
    body = sse(chunk("via the proxy", "stop"), "[DONE]")
    async with answering(ok_response(body)) as proxy:
        monkeypatch.setenv("HTTP_PROXY", proxy.url)
        monkeypatch.delenv("NO_PROXY", raising=False)
        monkeypatch.delenv("no_proxy", raising=False)
        llm = OpenAICompatLLM("openai/fake", base_url="http://model.invalid/v1", max_retries=0)
        lean.append(llm)
        got = await llm.complete(stage="route", messages=MSGS)
    assert got.text == "via the proxy"
    assert proxy.heads[0].startswith(b"POST http://model.invalid/v1/chat/completions ")


async def test_no_proxy_sends_the_call_directly(
    monkeypatch: pytest.MonkeyPatch, fake_model: FakeModelServer, lean: list[OpenAICompatLLM]
) -> None:
    monkeypatch.setenv("HTTP_PROXY", f"http://127.0.0.1:{free_port()}")  # nobody listens
    monkeypatch.setenv("NO_PROXY", "127.0.0.1")
    fake_model.script({"stage": "route", "content": "direct"})
    llm = OpenAICompatLLM("openai/fake", base_url=fake_model.base_url, max_retries=0)
    lean.append(llm)
    assert (await llm.complete(stage="route", messages=MSGS)).text == "direct"


async def test_a_compressed_stream_is_read_decompressed(lean: list[OpenAICompatLLM]) -> None:
    """A reply sent with Content-Encoding: gzip is decoded before it is parsed."""
    body = gzip.compress(sse(chunk("packed "), chunk("reply", "stop"), "[DONE]"))
    async with answering(ok_response(body, b"content-encoding: gzip")) as model:
        llm = OpenAICompatLLM("openai/fake", base_url=f"{model.url}/v1")
        lean.append(llm)
        got = await llm.complete(stage="route", messages=MSGS)
    assert (got.text, got.finish_reason) == ("packed reply", "stop")


async def test_openais_own_api_gets_the_bound_as_max_completion_tokens(
    lean: list[OpenAICompatLLM],
) -> None:
    """OpenAI's reasoning models refuse `max_tokens`; its API takes `max_completion_tokens`
    for every model. Other servers (the fake, llama-server, Ollama) get `max_tokens`."""
    seen: list[dict[str, Any]] = []

    def answer(request: httpx.Request) -> httpx.Response:
        seen.append(json.loads(request.content))
        return httpx.Response(
            200,
            content=sse(chunk("ok"), chunk(finish="stop"), "[DONE]"),
            headers={"content-type": "text/event-stream"},
        )

    for base_url in ("https://api.openai.com/v1", "http://model.invalid/v1"):
        llm = OpenAICompatLLM(
            "openai/o3-mini",
            api_key="sk-test",
            base_url=base_url,
            max_output_tokens=500,
            transport=httpx.MockTransport(answer),
        )
        lean.append(llm)
        await llm.complete(stage="thinking", messages=MSGS)
    assert seen[0]["max_completion_tokens"] == 500 and "max_tokens" not in seen[0]
    assert seen[1]["max_tokens"] == 500 and "max_completion_tokens" not in seen[1]
