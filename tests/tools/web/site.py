"""A small web site on 127.0.0.1 for web_fetch: pages, scripts, redirects, faults, a PDF.

Every request is recorded (``site.paths``); ``/slow`` holds until the site stops.
"""

from __future__ import annotations

import contextlib
import threading
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

HUGE_BYTES = 100 * 2**20


def pdf_with_text(text: str, title: str) -> bytes:
    """A one-page PDF whose page shows ``text`` (Helvetica) and whose Info names ``title``."""
    stream = f"BT /F1 18 Tf 72 720 Td ({text}) Tj ET".encode()
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources << /Font << /F1 4 0 R"
        b" >> >> /Contents 5 0 R >>",
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
        b"<< /Length %d >>\nstream\n" % len(stream) + stream + b"\nendstream",
        b"<< /Title (" + title.encode() + b") >>",
    ]
    out = bytearray(b"%PDF-1.4\n")
    offsets = []
    for n, body in enumerate(objects, 1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % n + body + b"\nendobj\n"
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    for off in offsets:
        out += b"%010d 00000 n \n" % off
    out += b"trailer\n<< /Size %d /Root 1 0 R /Info 6 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (
        len(objects) + 1,
        xref,
    )
    return bytes(out)


class Site:
    def __init__(self) -> None:
        self.nonce = uuid.uuid4().hex
        self.script_nonce = uuid.uuid4().hex
        self.paths: list[str] = []
        self.huge_sent = 0
        self.release = threading.Event()
        self.redirect_to: dict[str, str] = {}
        # what the script-built page asks for besides itself (the network policy's test)
        self.spa_fetch = "http://169.254.169.254/latest/meta-data"
        site = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            disable_nagle_algorithm = True  # headers and body leave at once (keep-alive)

            def log_message(self, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                site.paths.append(self.path)
                with contextlib.suppress(OSError):  # the client went away
                    site.answer(self)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self.thread = threading.Thread(target=self.server.serve_forever, args=(0.05,), daemon=True)

    def start(self) -> Site:
        self.thread.start()
        return self

    def stop(self) -> None:
        self.release.set()
        self.server.shutdown()
        self.server.server_close()

    def index(self) -> str:
        para = " ".join(["planact reads this page for its agents."] * 8)
        return (
            "<!doctype html><html><head><title>Nonce Page</title></head><body>"
            "<nav><a href='/about'>About</a> <a href='https://example.org/docs#top'>Docs</a>"
            " <a href='mailto:x@example.org'>Mail</a></nav>"
            "<main><article><h1>The nonce</h1>"
            f"<p>The secret nonce is {self.nonce}. {para}</p>"
            f"<p>Another paragraph that says more. {para}</p>"
            "<div id='built'></div></article></main>"
            "<script>document.getElementById('built').textContent = "
            f"'built by script {self.script_nonce}';</script>"
            "</body></html>"
        )

    def spa(self) -> str:
        # nothing readable without scripts: the script writes the whole article
        return (
            "<!doctype html><html><head><title>Script App</title></head><body>"
            "<div id='root'></div><script>"
            "const p = 'This article is built by a script. '.repeat(12);"
            "document.getElementById('root').innerHTML = '<article><h1>Built</h1><p>' + p + "
            f"'{self.script_nonce}</p><p>' + p + '</p></article>';"
            f"fetch('{self.spa_fetch}').catch(() => {{}});"
            f"</script><img src='{self.spa_fetch}/pixel.png'></body></html>"
        )

    def answer(self, h: BaseHTTPRequestHandler) -> None:
        path = h.path.split("?", 1)[0]
        if path in self.redirect_to:
            return self.send(h, 302, b"", headers={"Location": self.redirect_to[path]})
        if path == "/":
            return self.send(h, 200, self.index().encode(), "text/html; charset=utf-8")
        if path == "/about":
            return self.send(h, 200, b"<html><title>About</title><p>about</p></html>", "text/html")
        if path == "/spa":
            return self.send(h, 200, self.spa().encode(), "text/html; charset=utf-8")
        if path in ("/r1", "/r2", "/r3"):
            nxt = {"/r1": "/r2", "/r2": "/r3", "/r3": "/"}[path]
            return self.send(h, 301, b"", headers={"Location": nxt})
        if path.startswith("/chain"):
            n = int(path[len("/chain") :] or 0)
            return self.send(h, 302, b"", headers={"Location": f"/chain{n + 1}"})
        if path in ("/loop-a", "/loop-b"):
            other = "/loop-b" if path == "/loop-a" else "/loop-a"
            return self.send(h, 302, b"", headers={"Location": other})
        if path == "/slow":
            self.release.wait(60)
            return self.send(h, 200, b"late", "text/plain")
        if path == "/huge":
            return self.huge(h)
        if path == "/bin":
            return self.send(h, 200, bytes(range(256)) * 64, "application/octet-stream")
        if path == "/image.png":
            return self.send(h, 200, b"\x89PNG\r\n\x1a\n" + b"\x00" * 64, "image/png")
        if path == "/doc.pdf":
            pdf = pdf_with_text(f"PDF nonce {self.nonce}", "Nonce Report")
            return self.send(h, 200, pdf, "application/pdf")
        if path == "/untyped":  # no Content-Type: HTML found by its first bytes
            body = f"<!doctype html><html><head><title>Untyped</title></head><body><p>{self.nonce}"
            return self.send(h, 200, body.encode(), ctype="")
        if path == "/latin1.txt":
            return self.send(
                h, 200, "caf\u00e9 cr\u00e8me".encode("latin-1"), "text/plain; charset=iso-8859-1"
            )
        if path == "/notes.txt":
            return self.send(h, 200, f"plain notes {self.nonce}\n".encode(), "text/plain")
        return self.send(h, 404, b"<html><title>Not Found</title>no such page</html>", "text/html")

    def huge(self, h: BaseHTTPRequestHandler) -> None:
        h.send_response(200)
        h.send_header("Content-Type", "text/html")
        h.send_header("Content-Length", str(HUGE_BYTES))
        h.end_headers()
        chunk = b"<p>" + b"x" * 65530 + b"</p>"
        while self.huge_sent < HUGE_BYTES and not self.release.is_set():
            h.wfile.write(chunk)
            self.huge_sent += len(chunk)

    @staticmethod
    def send(
        h: BaseHTTPRequestHandler,
        status: int,
        body: bytes,
        ctype: str = "text/plain",
        headers: dict[str, str] | None = None,
    ) -> None:
        h.send_response(status)
        if ctype:
            h.send_header("Content-Type", ctype)
        h.send_header("Content-Length", str(len(body)))
        for k, v in (headers or {}).items():
            h.send_header(k, v)
        h.end_headers()
        h.wfile.write(body)
