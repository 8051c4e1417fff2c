"""A real OTLP/HTTP receiver on a loopback port, for the telemetry tests: what the exporters send, decoded.

It serves ``POST /v1/traces`` and ``POST /v1/metrics`` (protobuf, gzip or not) as a collector would, answers 200
with an empty export response, and keeps every request's raw body (to prove what bytes never left the proxy)
and its decoded spans and metric points.
"""

from __future__ import annotations

import gzip
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (
    ExportMetricsServiceRequest,
    ExportMetricsServiceResponse,
)
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue

SPAN_KINDS = {0: "UNSPECIFIED", 1: "INTERNAL", 2: "SERVER", 3: "CLIENT", 4: "PRODUCER", 5: "CONSUMER"}


def _value(value: AnyValue) -> Any:
    which = value.WhichOneof("value")
    if which == "array_value":
        return [_value(v) for v in value.array_value.values]
    if which == "kvlist_value":
        return _attributes(value.kvlist_value.values)
    return getattr(value, which) if which else None


def _attributes(pairs: Any) -> dict[str, Any]:
    return {pair.key: _value(pair.value) for pair in pairs if isinstance(pair, KeyValue)}


class Receiver:
    """The receiver; ``endpoint`` is what ``OTEL_EXPORTER_OTLP_ENDPOINT`` should say."""

    def __init__(self) -> None:
        self.raw: list[bytes] = []
        self.spans: list[dict[str, Any]] = []
        self.metrics: list[dict[str, Any]] = []
        self.requests = 0
        self._lock = threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("content-length", "0")))
                if self.headers.get("content-encoding") == "gzip":
                    body = gzip.decompress(body)
                if self.path == "/v1/traces":
                    receiver._traces(body)
                    answer = ExportTraceServiceResponse().SerializeToString()
                elif self.path == "/v1/metrics":
                    receiver._metrics(body)
                    answer = ExportMetricsServiceResponse().SerializeToString()
                else:
                    self.send_error(404)
                    return
                self.send_response(200)
                self.send_header("content-type", "application/x-protobuf")
                self.send_header("content-length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def env(self, **extra: str) -> dict[str, str]:
        """The variables that point a Checkpoint process at this receiver, exporting quickly."""
        return {
            "OTEL_EXPORTER_OTLP_ENDPOINT": self.endpoint,
            "OTEL_SERVICE_NAME": "checkpoint-under-test",
            "OTEL_BSP_SCHEDULE_DELAY": "50",
            "OTEL_METRIC_EXPORT_INTERVAL": "200",
            **extra,
        }

    def _traces(self, body: bytes) -> None:
        request = ExportTraceServiceRequest()
        request.ParseFromString(body)
        with self._lock:
            self.requests += 1
            self.raw.append(body)
            for resource_spans in request.resource_spans:
                resource = _attributes(resource_spans.resource.attributes)
                for scope_spans in resource_spans.scope_spans:
                    for span in scope_spans.spans:
                        self.spans.append(
                            {
                                "name": span.name,
                                "kind": SPAN_KINDS.get(span.kind, str(span.kind)),
                                "trace_id": span.trace_id.hex(),
                                "span_id": span.span_id.hex(),
                                "parent": span.parent_span_id.hex() or None,
                                "trace_state": span.trace_state,
                                "attributes": _attributes(span.attributes),
                                "status": span.status.code,
                                "status_message": span.status.message,
                                "links": [(link.trace_id.hex(), link.span_id.hex()) for link in span.links],
                                "start": span.start_time_unix_nano,
                                "end": span.end_time_unix_nano,
                                "resource": resource,
                            }
                        )

    def _metrics(self, body: bytes) -> None:
        request = ExportMetricsServiceRequest()
        request.ParseFromString(body)
        with self._lock:
            self.requests += 1
            self.raw.append(body)
            for resource_metrics in request.resource_metrics:
                for scope_metrics in resource_metrics.scope_metrics:
                    for metric in scope_metrics.metrics:
                        kind = metric.WhichOneof("data")
                        points = getattr(metric, kind).data_points if kind else []
                        for point in points:
                            self.metrics.append(
                                {
                                    "name": metric.name,
                                    "unit": metric.unit,
                                    "kind": kind,
                                    "attributes": _attributes(point.attributes),
                                    "count": getattr(point, "count", None),
                                    "bounds": list(getattr(point, "explicit_bounds", [])),
                                }
                            )

    def wait_for_spans(self, predicate: Any, timeout: float = 20.0) -> list[dict[str, Any]]:
        """The spans received once ``predicate(spans)`` holds (bounded)."""
        deadline = time.monotonic() + timeout
        while True:
            with self._lock:
                spans = list(self.spans)
            if predicate(spans):
                return spans
            if time.monotonic() > deadline:
                names = sorted({span["name"] for span in spans})
                raise AssertionError(f"the receiver did not get the expected spans within {timeout}s; got {names}")
            time.sleep(0.02)

    def __enter__(self) -> Receiver:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
