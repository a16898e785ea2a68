"""A fake search provider on 127.0.0.1: SearXNG, Tavily and Brave shapes, and their faults.

``mode`` picks the answer: good, slow (holds until released), 429, garbage (not JSON),
shapeless (JSON without results), error (HTTP 500), empty (no results), junk_links
(results without http(s) links), huge (a 5 MB answer). Every request is recorded.
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

HITS = [
    {"title": f"Result {n}", "url": f"https://example.org/page{n}", "snippet": f"snippet {n}"}
    for n in range(1, 13)
]


class FakeSearch:
    def __init__(self) -> None:
        self.mode = "good"
        self.requests: list[dict[str, Any]] = []
        self.release = threading.Event()
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                fake.answer(self, b"")

            def do_POST(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                fake.answer(self, self.rfile.read(length))

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, args=(0.05,), daemon=True)

    def start(self) -> FakeSearch:
        self.thread.start()
        return self

    def stop(self) -> None:
        self.release.set()
        self.server.shutdown()
        self.server.server_close()

    def answer(self, handler: BaseHTTPRequestHandler, body: bytes) -> None:
        parts = urlsplit(handler.path)
        self.requests.append(
            {
                "method": handler.command,
                "path": parts.path,
                "query": parse_qs(parts.query),
                "headers": {k.lower(): v for k, v in handler.headers.items()},
                "body": json.loads(body) if body else None,
            }
        )
        mode = self.mode
        if mode == "slow":
            self.release.wait(30)
            return self._send(handler, 200, b"{}")
        if mode == "429":
            return self._send(handler, 429, b'{"error": "too many"}', {"Retry-After": "7"})
        if mode == "error":
            return self._send(handler, 500, b"<html>upstream broke</html>", ctype="text/html")
        if mode == "garbage":
            return self._send(handler, 200, b"<html>\x00\xff not json", ctype="text/html")
        if mode == "huge":
            return self._send(handler, 200, b'{"results": ["' + b"x" * 5_000_000 + b'"]}')
        if mode == "shapeless":
            return self._send(handler, 200, b'{"unexpected": [1, 2]}')
        hits = [] if mode == "empty" else HITS
        if mode == "junk_links":
            hits = [{"title": "x", "url": "javascript:alert(1)", "snippet": ""}, {"title": "y"}]
        return self._send(handler, 200, json.dumps(self.shape(parts.path, hits)).encode())

    @staticmethod
    def shape(path: str, hits: list[dict[str, Any]]) -> dict[str, Any]:
        if path == "/res/v1/web/search":  # Brave
            return {
                "type": "search",
                "web": {
                    "type": "search",
                    "results": [
                        {
                            "title": h.get("title"),
                            "url": h.get("url"),
                            "description": h.get("snippet"),
                        }
                        for h in hits
                    ],
                },
            }
        # SearXNG and Tavily both answer {"results": [...]} with the snippet in "content"
        return {
            "query": "q",
            "results": [
                {"title": h.get("title"), "url": h.get("url"), "content": h.get("snippet")}
                for h in hits
            ],
        }

    @staticmethod
    def _send(
        handler: BaseHTTPRequestHandler,
        status: int,
        body: bytes,
        headers: dict[str, str] | None = None,
        ctype: str = "application/json",
    ) -> None:
        try:
            handler.send_response(status)
            handler.send_header("Content-Type", ctype)
            handler.send_header("Content-Length", str(len(body)))
            for k, v in (headers or {}).items():
                handler.send_header(k, v)
            handler.end_headers()
            handler.wfile.write(body)
        except OSError:
            pass  # the client went away (timeouts)
