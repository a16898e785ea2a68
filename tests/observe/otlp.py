"""An OTLP/HTTP trace receiver for tests: POST /v1/traces (protobuf), decoded with
opentelemetry-proto; the spans it got, as plain dicts."""

from __future__ import annotations

import gzip
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue


def plain(value: AnyValue) -> Any:
    kind = value.WhichOneof("value")
    if kind == "array_value":
        return [plain(v) for v in value.array_value.values]
    if kind == "kvlist_value":
        return {kv.key: plain(kv.value) for kv in value.kvlist_value.values}
    return getattr(value, kind) if kind else None


class OtlpReceiver:
    def __init__(self) -> None:
        self.spans: list[dict[str, Any]] = []
        self.lock = threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                if self.headers.get("Content-Encoding") == "gzip":
                    body = gzip.decompress(body)
                if self.path != "/v1/traces":
                    self.send_response(404)
                    self.end_headers()
                    return
                request = ExportTraceServiceRequest()
                request.ParseFromString(body)
                receiver.take(request)
                answer = ExportTraceServiceResponse().SerializeToString()
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

            def log_message(self, format: str, *args: Any) -> None:
                return None

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def take(self, request: ExportTraceServiceRequest) -> None:
        got = []
        for resource_spans in request.resource_spans:
            resource = {kv.key: plain(kv.value) for kv in resource_spans.resource.attributes}
            for scope_spans in resource_spans.scope_spans:
                for span in scope_spans.spans:
                    got.append(
                        {
                            "trace_id": span.trace_id.hex(),
                            "span_id": span.span_id.hex(),
                            "parent": span.parent_span_id.hex(),
                            "name": span.name,
                            "attributes": {kv.key: plain(kv.value) for kv in span.attributes},
                            "links": [link.trace_id.hex() for link in span.links],
                            "status": span.status.code,
                            "resource": resource,
                        }
                    )
        with self.lock:
            self.spans.extend(got)

    def all(self) -> list[dict[str, Any]]:
        with self.lock:
            return list(self.spans)

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def __enter__(self) -> OtlpReceiver:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()


def otel_env(receiver: OtlpReceiver, **extra: str) -> dict[str, str]:
    """A process's variables to export its spans to ``receiver`` at once (50 ms batches)."""
    return {
        "OTEL_EXPORTER_OTLP_ENDPOINT": receiver.endpoint,
        "OTEL_BSP_SCHEDULE_DELAY": "50",
        **extra,
    }
