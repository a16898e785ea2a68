"""The small app the scripted model writes and previews (standard library only, as the
sandbox has it): a page whose script calls the API route and the WebSocket echo, a JSON
route, an upload route that answers the body's size and digest, and a WebSocket echo.

    python3 sample_app.py PORT
"""

from __future__ import annotations

import base64
import hashlib
import json
import struct
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
PAGE = b"""<!doctype html>
<html><head><title>sample app</title></head><body>
<p id="api">waiting</p><p id="ws">waiting</p>
<script>
fetch("api/hello").then(r => r.json()).then(d => {
  document.getElementById("api").textContent = "api:" + d.hello;
});
const ws = new WebSocket(location.href.replace(/^http/, "ws").replace(/[^/]*$/, "") + "ws");
ws.onopen = () => ws.send("ping");
ws.onmessage = (e) => { document.getElementById("ws").textContent = "ws:" + e.data; };
</script></body></html>
"""


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # as dev servers do: no 40 ms stall between two writes

    def log_message(self, format: str, *args: object) -> None:
        print("request", self.command, self.path, flush=True)

    def answer(self, status: int, body: bytes, kind: str, **headers: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        for key, value in headers.items():
            self.send_header(key.replace("_", "-"), value)
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:
        if self.path.endswith("/ws") or self.path == "/ws":
            self.websocket()
        elif "/api/hello" in self.path:
            seen = {
                "hello": "preview",
                "path": self.path,
                "prefix": self.headers.get("X-Forwarded-Prefix", ""),
                "connection": self.headers.get("Connection", ""),
            }
            self.answer(200, json.dumps(seen).encode(), "application/json", X_App="sample")
        elif "/teapot" in self.path:
            self.answer(418, b"short and stout", "text/plain")
        else:
            self.answer(200, PAGE, "text/html; charset=utf-8")

    def do_POST(self) -> None:
        size = int(self.headers.get("Content-Length", "0"))
        digest = hashlib.sha256()
        left = size
        while left > 0:
            chunk = self.rfile.read(min(left, 65536))
            if not chunk:
                break
            digest.update(chunk)
            left -= len(chunk)
        self.answer(
            200,
            json.dumps({"size": size, "sha256": digest.hexdigest()}).encode(),
            "application/json",
        )

    def do_PUT(self) -> None:  # a big answer: the bytes asked for
        size = int(self.path.rsplit("/", 1)[-1])
        self.send_response(200)
        self.send_header("Content-Length", str(size))
        self.end_headers()
        block = b"x" * 65536
        while size > 0:
            self.wfile.write(block[: min(size, len(block))])
            size -= min(size, len(block))

    def websocket(self) -> None:
        key = self.headers["Sec-WebSocket-Key"]
        accept = base64.b64encode(hashlib.sha1((key + GUID).encode()).digest()).decode()
        self.send_response(101)
        self.send_header("Upgrade", "websocket")
        self.send_header("Connection", "Upgrade")
        self.send_header("Sec-WebSocket-Accept", accept)
        self.end_headers()
        self.wfile.flush()
        while True:
            head = self.rfile.read(2)
            if len(head) < 2:
                return
            opcode, length = head[0] & 0x0F, head[1] & 0x7F
            if length == 126:
                length = struct.unpack("!H", self.rfile.read(2))[0]
            elif length == 127:
                length = struct.unpack("!Q", self.rfile.read(8))[0]
            mask = self.rfile.read(4) if head[1] & 0x80 else b"\0\0\0\0"
            data = bytes(b ^ mask[i % 4] for i, b in enumerate(self.rfile.read(length)))
            if opcode == 8:
                self.wfile.write(b"\x88\x00")
                return
            if opcode in (1, 2):
                out = bytes([0x80 | opcode])
                if len(data) < 126:
                    out += bytes([len(data)])
                elif len(data) < 65536:
                    out += bytes([126]) + struct.pack("!H", len(data))
                else:
                    out += bytes([127]) + struct.pack("!Q", len(data))
                self.wfile.write(out + data)
                self.wfile.flush()


def main() -> None:
    port = int(sys.argv[1])
    server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    print(f"listening on {port}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
