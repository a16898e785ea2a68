"""An app (standard library, run as a process of its own) that answers in each way HTTP/1.1
frames a body, and in the ways an app gets it wrong, for the proxy's tests.

    python3 framing_app.py PORT

GET /pattern/N  N bytes of a fixed pseudo-random pattern (Content-Length)
POST /upload    the body's size and SHA-256 (JSON), Content-Length or chunked
GET /chunked    a chunked answer; GET /until-close: an HTTP/1.0 answer ended by closing
GET /short      says 1000000 bytes, sends 1000 and closes; GET /silent: closes, no answer
GET /headers    the request's headers as it got them (JSON, names lowercased)
GET /cookie     an answer with a Set-Cookie for a parent domain, its own Referrer-Policy, and
                a header it names in Connection (each for the proxy to take out)
GET /upgrade    with Upgrade: echo, 101, then every byte sent back until the client closes
                (no Upgrade: 426)
"""

from __future__ import annotations

import hashlib
import json
import random
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def pattern(size: int) -> bytes:
    return random.Random(size).randbytes(size)


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: object) -> None:
        pass

    def do_GET(self) -> None:
        if self.path.startswith("/pattern/"):
            body = pattern(int(self.path.rsplit("/", 1)[-1]))
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
        elif self.path == "/chunked":
            self.send_response(200)
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            for part in (b"first,", b"second,", b"third"):
                self.wfile.write(b"%x\r\n%s\r\n" % (len(part), part))
            self.wfile.write(b"0\r\n\r\n")
        elif self.path == "/until-close":
            self.wfile.write(b"HTTP/1.0 200 OK\r\nContent-Type: text/plain\r\n\r\nall of it")
            self.close_connection = True
        elif self.path == "/short":
            self.send_response(200)
            self.send_header("Content-Length", "1000000")
            self.end_headers()
            self.wfile.write(b"y" * 1000)
            self.close_connection = True
        elif self.path == "/silent":
            self.close_connection = True
        elif self.path == "/headers":
            self.answer_json({k.lower(): v for k, v in self.headers.items()})
        elif self.path == "/cookie":
            self.send_response(200)
            self.send_header("Set-Cookie", "a=1; Domain=localhost; Path=/; HttpOnly")
            self.send_header("Set-Cookie", "b=2; path=/;domain=.example.com")
            self.send_header("Referrer-Policy", "unsafe-url")
            self.send_header("Connection", "X-App-Hop")
            self.send_header("X-App-Hop", "1")
            self.send_header("Content-Length", "2")
            self.end_headers()
            self.wfile.write(b"ok")
        elif self.path == "/upgrade":
            self.upgrade()
        else:
            self.send_response(200)
            self.send_header("Content-Length", "5")
            self.end_headers()
            self.wfile.write(b"hello")

    def do_POST(self) -> None:
        digest, size = hashlib.sha256(), 0
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            while part := int(self.rfile.readline().split(b";")[0], 16):
                digest.update(self.rfile.read(part))
                size += part
                self.rfile.readline()
            self.rfile.readline()  # the end: no trailers here
            self.answer_json({"size": size, "sha256": digest.hexdigest()})
            return
        left = int(self.headers.get("Content-Length", "0"))
        while left > 0:
            chunk = self.rfile.read(min(left, 65536))
            if not chunk:
                return
            digest.update(chunk)
            left -= len(chunk)
            size += len(chunk)
        self.answer_json({"size": size, "sha256": digest.hexdigest()})

    def upgrade(self) -> None:
        if self.headers.get("Upgrade", "").lower() != "echo":
            self.send_response(426)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        self.send_response(101)
        self.send_header("Upgrade", "echo")
        self.send_header("Connection", "Upgrade")
        self.end_headers()
        self.wfile.write(b"hello from the app;")
        self.wfile.flush()
        while data := self.rfile.read1(65536):
            self.wfile.write(data)
            self.wfile.flush()
        self.close_connection = True

    def answer_json(self, value: object) -> None:
        body = json.dumps(value).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


def main() -> None:
    server = ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), Handler)
    print("listening", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
