"""The minimal relay the stream benchmark compares planact with: the same stack
(Starlette, uvicorn, SQLite, httpx) doing the least a streaming agent service must do.

POST /run {"goal", "calls"?: ["route", "auto_reply"]} answers text/event-stream: the
question is stored as one SQLite row and sent as one SSE event; then for each stage in
``calls`` one streamed model call (httpx + json.loads per chunk), whose reply is stored as
one row and sent as one event; then `event: end`. While a reply streams, its text goes out
as live `delta` events as planact's do (for prose stages; planact shows no deltas of a
route's JSON) ({"uuid", "action_type", "text"}: the increments
since the last one, at most one every 50 ms per message, the rest flushed before the stored
message). GET /api/health answers {"status": "ok"}.

  python bench/relay.py --port P --model-url http://127.0.0.1:M/v1 --db /tmp/relay.db
      [--no-deltas]   (no live deltas: what they cost, bench/ablate_deltas.py)
      [--aiohttp]     (httpx over aiohttp's connections, as planact's model client reads)
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sqlite3
import time
import uuid
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import httpx
import uvicorn
from httpx_aiohttp import AiohttpTransport
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

DELTA_INTERVAL = 0.05  # seconds between two deltas of one message (planact's INTERVAL)
PROSE = frozenset({"auto_reply", "summary"})  # stages whose text is shown live


def make_app(
    model_url: str, db_path: str, prose: frozenset[str] = PROSE, over_aiohttp: bool = False
) -> Starlette:
    db = sqlite3.connect(db_path, check_same_thread=False, isolation_level=None)
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("PRAGMA synchronous=NORMAL")
    db.execute(
        "CREATE TABLE IF NOT EXISTS messages (seq INTEGER PRIMARY KEY, run_id TEXT, "
        "kind TEXT, content TEXT)"
    )
    if over_aiohttp:
        transport = AiohttpTransport(
            client=lambda: aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0))
        )
        client = httpx.AsyncClient(timeout=httpx.Timeout(None), transport=transport)
    else:
        client = httpx.AsyncClient(
            timeout=httpx.Timeout(None), limits=httpx.Limits(max_connections=None)
        )

    def store(run_id: str, kind: str, content: str) -> str:
        cur = db.execute(
            "INSERT INTO messages (run_id, kind, content) VALUES (?, ?, ?)",
            (run_id, kind, content),
        )
        data = json.dumps({"run_id": run_id, "kind": kind, "content": content})
        return f"id: {cur.lastrowid}\nevent: message\ndata: {data}\n\n"

    def delta(stage: str, msg_uuid: str, text: str) -> str:
        data = json.dumps({"uuid": msg_uuid, "action_type": stage, "text": text})
        return f"event: delta\ndata: {data}\n\n"

    async def read_model(stage: str, goal: str, parts: list[str], arrived: asyncio.Event) -> None:
        """Stream the model's reply into ``parts``, setting ``arrived`` on each piece."""
        body = {
            "model": "fake",
            "messages": [{"role": "user", "content": goal}],
            "stream": True,
            "max_tokens": 8192,
        }
        async with client.stream(
            "POST",
            f"{model_url}/chat/completions",
            json=body,
            headers={"X-Agent-Stage": stage},
        ) as resp:
            async for line in resp.aiter_lines():
                if line.startswith("data: ") and line != "data: [DONE]":
                    chunk: Any = json.loads(line[6:])
                    for choice in chunk.get("choices") or []:
                        piece = (choice.get("delta") or {}).get("content")
                        if piece:
                            parts.append(piece)
                            arrived.set()

    async def call_model(run_id: str, stage: str, goal: str) -> AsyncIterator[str]:
        """The reply's deltas (SSE events: what arrived since the last one, at most one
        every DELTA_INTERVAL, the first at once), then the stored reply's event."""
        msg_uuid = uuid.uuid4().hex
        parts: list[str] = []
        arrived = asyncio.Event()
        reading = asyncio.ensure_future(read_model(stage, goal, parts, arrived))
        reading.add_done_callback(lambda _: arrived.set())
        sent, last_sent = 0, float("-inf")
        try:
            while True:
                await arrived.wait()
                arrived.clear()
                if stage in prose and len(parts) > sent:
                    wait = last_sent + DELTA_INTERVAL - time.monotonic()
                    if wait > 0 and not reading.done():
                        await asyncio.sleep(wait)
                    upto = len(parts)
                    yield delta(stage, msg_uuid, "".join(parts[sent:upto]))
                    sent, last_sent = upto, time.monotonic()
                if reading.done() and (len(parts) == sent or stage not in prose):
                    break
        finally:
            reading.cancel()
        reading.result()
        yield store(run_id, stage, "".join(parts))

    async def run(request: Request) -> Response:
        data = await request.json()
        goal = str(data.get("goal", ""))
        calls = list(data.get("calls") or ["auto_reply"])
        run_id = uuid.uuid4().hex

        async def events() -> AsyncIterator[str]:
            yield store(run_id, "question", goal)
            for stage in calls:
                async for event in call_model(run_id, stage, goal):
                    yield event
            yield f'event: end\ndata: {{"run_id": "{run_id}", "status": "completed"}}\n\n'

        return StreamingResponse(events(), media_type="text/event-stream")

    async def health(_request: Request) -> Response:
        return JSONResponse({"status": "ok"})

    return Starlette(
        routes=[
            Route("/run", run, methods=["POST"]),
            Route("/api/health", health, methods=["GET"]),
        ]
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--model-url", required=True)
    parser.add_argument("--db", required=True)
    parser.add_argument("--no-deltas", action="store_true", help="send no live deltas")
    parser.add_argument(
        "--aiohttp", action="store_true", help="read the model over aiohttp's connections"
    )
    args = parser.parse_args()
    uvicorn.run(
        make_app(args.model_url, args.db, frozenset() if args.no_deltas else PROSE, args.aiohttp),
        host="127.0.0.1",
        port=args.port,
        log_level="warning",
    )


if __name__ == "__main__":
    main()
