"""The OpenTelemetry SDK behind the ``telemetry`` seam: spans and metrics of MCP traffic, by the MCP conventions.

Imported only when telemetry is on (``telemetry.from_environ``); everything here may import OpenTelemetry. The
providers are this process's own (the global ones are left alone) and read the standard ``OTEL_*`` variables:
the OTLP/HTTP exporters their endpoint, headers and timeout, the tracer provider ``OTEL_TRACES_SAMPLER``, the
batch processor ``OTEL_BSP_*``, the metric reader ``OTEL_METRIC_EXPORT_INTERVAL``, the resource
``OTEL_SERVICE_NAME`` and ``OTEL_RESOURCE_ATTRIBUTES`` (``service.name`` defaults to ``checkpoint``), the
propagators ``OTEL_PROPAGATORS``.

A ``LineTrace`` reads the lines crossing one interceptor and never changes them. What the journal decided is
read off the answer the client gets: a result's ``_meta["checkpoint/journal"]`` says workflow, sequence and
whether it was replayed; a refusal's error code and ``data`` say why and where.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Mapping
from typing import Any

from opentelemetry import propagate, trace
from opentelemetry.context import Context
from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import PeriodicExportingMetricReader
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from opentelemetry.trace import Link, Span, SpanKind, Status, StatusCode

from checkpoint_mcp import refusals
from checkpoint_mcp.telemetry import CallTrace, Peer, Telemetry
from checkpoint_mcp.wire import (
    JOURNAL_META,
    PROTOCOL_VERSION_META,
    Kind,
    Message,
    WireParseError,
    classify,
    dumps,
    id_key,
)

INSTRUMENTATION = "checkpoint_mcp"
SHUTDOWN_SECONDS = 3.0  # at exit: how long the last export may take (the SDK's own default would be 30 s)
logger = logging.getLogger(__name__)
DURATION_BUCKETS = (0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 30, 60, 120, 300)  # the conventions' advice
REPEAT_OF = "repeatOf"  # in JOURNAL_META: a repeat caught by a tool policy, answered with the original's result
SETTLED_META = "checkpoint/settled"  # an in-doubt call settled by a tool policy's probe
COMMIT_SPAN = "checkpoint.journal.commit"
NAMED_TARGETS = {"tools/call": "gen_ai.tool.name", "prompts/get": "gen_ai.prompt.name"}

# What the journal decided, by the code of the refusal the client got. A refusal not named here that reaches
# the client of a call that went upstream is the outcome of a run (the upstream's own error, or the upstream
# gone); one that never went upstream was refused here.
DECISION_BY_CODE: dict[int, str] = {
    refusals.IN_DOUBT: "in_doubt",
    refusals.DIVERGENCE: "divergence",
    refusals.COLLECTED: "collected",
    refusals.STILL_IN_FLIGHT: "in_flight",
    refusals.JOURNAL_WRITE_FAILED: "journal_write_failed",
    refusals.REPEAT_REFUSED: "repeat",
}
# A call whose tool needs a person's approval: refused as ``awaiting_approval`` or ``approval_denied`` (its
# ``data.reason``), or run on one (its result's journal _meta names the approval): ``checkpoint.approval`` is the id.
APPROVAL_REASONS = refusals.ERROR_CODES[refusals.APPROVAL_REQUIRED].reasons


class SdkTelemetry(Telemetry):
    """Tracer and meter providers exporting over OTLP/HTTP, configured by the ``OTEL_*`` variables."""

    enabled = True

    def __init__(self, *, traces: bool = True, metrics: bool = True, record_content: bool = False) -> None:
        resource = Resource.create()
        if str(resource.attributes.get("service.name", "")).startswith("unknown_service"):
            resource = resource.merge(Resource({"service.name": "checkpoint"}))
        self._tracer_provider = TracerProvider(resource=resource, shutdown_on_exit=False)
        if traces:
            self._tracer_provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
        readers = [PeriodicExportingMetricReader(OTLPMetricExporter())] if metrics else []
        self._meter_provider = MeterProvider(resource=resource, metric_readers=readers, shutdown_on_exit=False)
        self.tracer = self._tracer_provider.get_tracer(INSTRUMENTATION)
        meter = self._meter_provider.get_meter(INSTRUMENTATION)
        self.server_duration = meter.create_histogram(
            "mcp.server.operation.duration",
            unit="s",
            description="MCP request duration as observed on the receiver, from its arrival until its answer left",
            explicit_bucket_boundaries_advisory=DURATION_BUCKETS,
        )
        self.client_duration = meter.create_histogram(
            "mcp.client.operation.duration",
            unit="s",
            description="MCP request duration as observed on the sender, from its sending until its answer came",
            explicit_bucket_boundaries_advisory=DURATION_BUCKETS,
        )
        self.record_content = record_content

    def session(self, peer: Peer, *, journaled: bool = False, redact_args: bool = False) -> CallTrace | None:
        """A trace for one interceptor's traffic."""
        return LineTrace(self, peer, record_content=self.record_content and not redact_args, journaled=journaled)

    def shutdown(self) -> None:
        """Export every span and metric still buffered, then stop; a collector that does not take them within
        ``SHUTDOWN_SECONDS`` (down, or retrying) does not hold the process up: what is left is dropped."""
        worker = threading.Thread(target=self._shutdown, name="checkpoint-telemetry-shutdown", daemon=True)
        worker.start()
        worker.join(SHUTDOWN_SECONDS)
        if worker.is_alive():
            logger.warning("telemetry: the collector did not take the last spans within %gs; dropped", SHUTDOWN_SECONDS)

    def _shutdown(self) -> None:
        self._tracer_provider.shutdown()
        self._meter_provider.shutdown()


class _Call:
    """One request from the client, from its arrival until its answer leaves."""

    __slots__ = ("attributes", "client", "client_started", "commit_ns", "forwarded", "server", "started")

    def __init__(self, server: Span, attributes: dict[str, Any]) -> None:
        self.server = server
        self.attributes = attributes  # the metric attributes (low cardinality)
        self.started = time.perf_counter()
        self.client: Span | None = None
        self.client_started = 0.0
        self.forwarded = False
        self.commit_ns = 0


class LineTrace:
    """Spans for the requests of one interceptor's client (see ``telemetry.CallTrace``)."""

    def __init__(self, telemetry: SdkTelemetry, peer: Peer, *, record_content: bool, journaled: bool) -> None:
        self._telemetry = telemetry
        self._journaled = journaled
        self._tracer = telemetry.tracer
        self._peer = peer
        self._record_content = record_content
        self._calls: dict[tuple[str, Any], _Call] = {}
        self._protocol: str | None = None
        self._propagator = propagate.get_global_textmap()

    # ---- requests in ----------------------------------------------------------------------------------------

    def from_client(self, lines: list[bytes], carrier: Mapping[str, str] | None = None) -> None:
        """Open a SERVER span for each request among ``lines``; end the spans of the requests they cancel."""
        for line in lines:
            message = _parsed(line)
            if message is not None and message.method == "notifications/cancelled":
                self._cancelled(message.params)
            if message is None or message.kind is not Kind.REQUEST or not message.method:
                continue
            key = id_key(message.id)
            if key is None or key in self._calls:
                continue  # a duplicate id is refused by the interceptor; a joined call re-sent keeps its span
            self._start(key, message, carrier)

    def _cancelled(self, params: Any) -> None:
        """The client gave up on a request: its spans end now, as ``cancelled`` (an answer may never come; if one
        does, the interceptor still journals it, but no span waits for it)."""
        key = id_key(params.get("requestId")) if isinstance(params, dict) and "requestId" in params else None
        call = self._calls.pop(key, None) if key is not None else None
        if call is not None:
            self._end_server(call, {}, cancelled=True)

    def _start(self, key: tuple[str, Any], message: Message, carrier: Mapping[str, str] | None) -> None:
        method = message.method or ""
        params = message.params if isinstance(message.params, dict) else {}
        found = params.get("_meta")
        meta: dict[str, Any] = found if isinstance(found, dict) else {}
        if method == "initialize" and isinstance(params.get("protocolVersion"), str):
            self._protocol = params["protocolVersion"]
        version = meta.get(PROTOCOL_VERSION_META)
        protocol = version if isinstance(version, str) else self._protocol
        metric: dict[str, Any] = {"mcp.method.name": method, "network.transport": self._peer.client_transport}
        target_key = NAMED_TARGETS.get(method)
        target = params.get("name") if target_key is not None else None
        if isinstance(target, str) and target_key is not None:
            metric[target_key] = target
        if method == "tools/call":
            metric["gen_ai.operation.name"] = "execute_tool"
        if protocol:
            metric["mcp.protocol.version"] = protocol
        attributes = {**metric, "jsonrpc.request.id": _id_text(message.id)}
        if self._peer.principal is not None:
            attributes["checkpoint.principal"] = self._peer.principal  # a span's, not a metric's: unbounded
        if self._record_content and method == "tools/call" and "arguments" in params:
            attributes["gen_ai.tool.call.arguments"] = dumps(params["arguments"])
        parent, links = self._parent(meta, carrier)
        name = f"{method} {target}" if isinstance(target, str) else method
        span = self._tracer.start_span(name, context=parent, kind=SpanKind.SERVER, attributes=attributes, links=links)
        self._calls[key] = _Call(span, metric)

    def _parent(self, meta: dict[str, Any], carrier: Mapping[str, str] | None) -> tuple[Context, list[Link]]:
        """The request's ``_meta`` trace context as parent (SEP-414), else the HTTP headers', else none (a root:
        never whatever context the event loop happens to hold); the HTTP context is linked when both are there
        (the conventions: MCP and transport contexts are independent)."""
        in_meta = {
            k: v for k, v in meta.items() if k in ("traceparent", "tracestate", "baggage") and isinstance(v, str)
        }
        from_meta = self._propagator.extract(in_meta) if "traceparent" in in_meta else None
        from_http = self._propagator.extract(dict(carrier)) if carrier else None
        if from_meta is None:
            return from_http if from_http is not None else Context(), []
        links: list[Link] = []
        if from_http is not None:
            linked = trace.get_current_span(from_http).get_span_context()
            if linked.is_valid:
                links.append(Link(linked))
        return from_meta, links

    # ---- the upstream exchange --------------------------------------------------------------------------------

    def to_upstream(self, lines: list[bytes], commit: tuple[int, int] | None = None) -> None:
        """Open the CLIENT span of each request leaving for the upstream (after the commit it waited for)."""
        for line in lines:
            call = self._call_of(line, Kind.REQUEST)
            if call is None or call.client is not None:
                continue
            if commit is not None and self._journaled_call(call):
                self._commit_span(call, commit, "reserve")
            call.forwarded = True
            name = _span_name(call)
            attributes = {**call.attributes, "network.transport": self._peer.upstream_transport}
            if self._peer.server_address is not None:
                attributes["server.address"] = self._peer.server_address
                if self._peer.server_port is not None:
                    attributes["server.port"] = self._peer.server_port
            context = trace.set_span_in_context(call.server)
            call.client = self._tracer.start_span(name, context=context, kind=SpanKind.CLIENT, attributes=attributes)
            call.client_started = time.perf_counter()

    def headers_for(self, key: tuple[str, Any] | None) -> dict[str, str]:
        """``traceparent`` (and ``tracestate``) naming the upstream exchange's span as parent."""
        call = self._calls.get(key) if key is not None else None
        headers: dict[str, str] = {}
        if call is not None and call.client is not None:
            self._propagator.inject(headers, context=trace.set_span_in_context(call.client))
        return headers

    def from_upstream(self, lines: list[bytes]) -> None:
        """End the CLIENT span of each request the upstream answers."""
        if not self._calls:
            return
        for line in lines:
            message = _parsed(line)
            if message is None or message.kind is not Kind.RESPONSE:
                continue
            key = id_key(message.id)
            call = self._calls.get(key) if key is not None else None
            if call is not None and call.client is not None:
                self._end_client(call, _outcome(message.body))

    def _end_client(self, call: _Call, outcome: dict[str, Any]) -> None:
        client = call.client
        assert client is not None
        error_type = self._mark_error(client, outcome)
        client.end()
        attributes = {**call.attributes, "network.transport": self._peer.upstream_transport}
        if self._peer.server_address is not None:
            attributes["server.address"] = self._peer.server_address
        if error_type is not None:
            attributes["error.type"] = error_type
        self._telemetry.client_duration.record(time.perf_counter() - call.client_started, attributes)
        call.client = None

    # ---- answers out -----------------------------------------------------------------------------------------

    def to_client(self, lines: list[bytes], commit: tuple[int, int] | None = None) -> None:
        """End the SERVER span of each request answered among ``lines``, with what the journal decided."""
        if not self._calls:
            return
        for line in lines:
            message = _parsed(line)
            if message is None or message.kind is not Kind.RESPONSE:
                continue
            key = id_key(message.id)
            if key is None or key not in self._calls or _duplicate_refusal(message.body):
                continue
            call = self._calls.pop(key)
            if commit is not None and call.forwarded and self._journaled_call(call):
                self._commit_span(call, commit, "complete")
            self._end_server(call, message.body)

    def _end_server(self, call: _Call, body: dict[str, Any], *, cancelled: bool = False) -> None:
        outcome = {"error.type": "cancelled"} if cancelled else _outcome(body)
        if call.attributes["mcp.method.name"] == "initialize":
            self._learn_version(call, body.get("result"))
        if call.client is not None:  # answered without the upstream's answer (it died, or the exchange broke)
            self._end_client(call, outcome)
        span = call.server
        journal = _journal_facts(body)
        decision = None
        if call.attributes["mcp.method.name"] == "tools/call" and self._journaled:
            decision = _decision(journal, outcome, call.forwarded)
            if decision is not None:
                span.set_attribute("checkpoint.decision", decision)
        for name in ("workflow", "seq", "approval"):
            if name in journal:
                span.set_attribute(f"checkpoint.{name}", journal[name])
        if call.commit_ns:
            span.set_attribute("checkpoint.journal.commit.duration", call.commit_ns / 1e9)
        error_type = self._mark_error(span, outcome)
        if self._record_content and call.attributes["mcp.method.name"] == "tools/call" and "result" in body:
            span.set_attribute("gen_ai.tool.call.result", dumps(body["result"]))
        span.end()
        attributes = dict(call.attributes)
        if error_type is not None:
            attributes["error.type"] = error_type
        if decision is not None:
            attributes["checkpoint.decision"] = decision
        self._telemetry.server_duration.record(time.perf_counter() - call.started, attributes)

    def _journaled_call(self, call: _Call) -> bool:
        """A tools/call of a journaling pump: the commit its line waited for held its own row (a request of another
        method behind it waits too, but nothing of its own was written)."""
        return self._journaled and call.attributes["mcp.method.name"] == "tools/call"

    def _learn_version(self, call: _Call, result: Any) -> None:
        """The protocol version the server chose in ``initialize``: for this span and every later one."""
        negotiated = result.get("protocolVersion") if isinstance(result, dict) else None
        if isinstance(negotiated, str):
            self._protocol = call.attributes["mcp.protocol.version"] = negotiated
            call.server.set_attribute("mcp.protocol.version", negotiated)

    def _mark_error(self, span: Span, outcome: dict[str, Any]) -> str | None:
        """``error.type``, the status code and an ERROR status on ``span`` if the outcome is an error; its type."""
        error_type = outcome.get("error.type")
        if error_type is not None:
            span.set_attribute("error.type", error_type)
            if "rpc.response.status_code" in outcome:
                span.set_attribute("rpc.response.status_code", outcome["rpc.response.status_code"])
            span.set_status(Status(StatusCode.ERROR, self._description(outcome)))
        return error_type if isinstance(error_type, str) else None

    def _description(self, outcome: dict[str, Any]) -> str:
        """The error status's description: the JSON-RPC error's message only where content may be recorded (a
        divergence's message shows the arguments; an upstream's may quote them), else the code's name."""
        message = outcome.get("message")
        if self._record_content and isinstance(message, str):
            return message
        code = outcome.get("code")
        if isinstance(code, int) and code in refusals.ERROR_CODES:
            return refusals.ERROR_CODES[code].name
        if outcome.get("error.type") == "tool_error":
            return "tool error (isError)"
        if outcome.get("error.type") == "cancelled":
            return "cancelled by the client"
        return f"JSON-RPC error {code}" if isinstance(code, int) else "error"

    def _commit_span(self, call: _Call, commit: tuple[int, int], what: str) -> None:
        start, end = commit
        context = trace.set_span_in_context(call.server)
        span = self._tracer.start_span(
            COMMIT_SPAN, context=context, start_time=start, attributes={"checkpoint.journal.write": what}
        )
        span.end(end_time=end)
        call.commit_ns += end - start

    def _call_of(self, line: bytes, kind: Kind) -> _Call | None:
        message = _parsed(line)
        if message is None or message.kind is not kind:
            return None
        key = id_key(message.id)
        return self._calls.get(key) if key is not None else None


def _parsed(line: bytes) -> Message | None:
    try:
        return classify(line)
    except WireParseError:
        return None


def _id_text(ident: Any) -> str:
    return ident if isinstance(ident, str) else json.dumps(ident)


def _span_name(call: _Call) -> str:
    method = call.attributes["mcp.method.name"]
    target = call.attributes.get("gen_ai.tool.name") or call.attributes.get("gen_ai.prompt.name")
    return f"{method} {target}" if target else str(method)


def _outcome(body: dict[str, Any]) -> dict[str, Any]:
    """``error.type`` (the JSON-RPC code, or ``tool_error`` for a result with ``isError``), status code, message."""
    error = body.get("error")
    if isinstance(error, dict):
        code = error.get("code")
        text = str(code) if isinstance(code, int) and not isinstance(code, bool) else "_OTHER"
        message = error.get("message")
        return {
            "error.type": text,
            "rpc.response.status_code": text,
            "message": message if isinstance(message, str) else None,
            "code": code,
            "data": error.get("data"),
        }
    if "error" in body:
        return {"error.type": "_OTHER", "message": None}
    result = body.get("result")
    if isinstance(result, dict) and result.get("isError") is True:
        return {"error.type": "tool_error"}
    return {}


def _journal_facts(body: dict[str, Any]) -> dict[str, Any]:
    """Workflow, sequence and ``replayed`` from a result's journal ``_meta`` or a refusal's ``data``."""
    result = body.get("result")
    if isinstance(result, dict):
        meta = result.get("_meta")
        if not isinstance(meta, dict):
            return {}
        facts = meta.get(JOURNAL_META)
        found = {}
        if isinstance(facts, dict):
            found = {
                k: v
                for k, v in facts.items()
                if k in ("workflow", "seq", "replayed", "approval", REPEAT_OF) and v is not None
            }
        if SETTLED_META in meta:
            found["settled"] = True
        return found
    error = body.get("error")
    data = error.get("data") if isinstance(error, dict) else None
    if isinstance(data, dict):
        said = {k: data[k] for k in ("workflow", "seq") if isinstance(data.get(k), str | int) and data[k] is not None}
        if isinstance(error, dict) and error.get("code") == refusals.APPROVAL_REQUIRED:
            said |= {"approval": data["approval"]} if isinstance(data.get("approval"), int) else {}
        return said
    return {}


def decision_of(body: dict[str, Any], forwarded: bool) -> str | None:
    """What the journal decided for a journaled tools/call, read off the answer the client got (``body``) and
    whether the call went upstream: run, replay, repeat, settled, or why it was refused (``DECISION_BY_CODE``);
    None for a call answered without the journal (a read-only tool under --trust-annotations)."""
    return _decision(_journal_facts(body), _outcome(body), forwarded)


def _decision(journal: dict[str, Any], outcome: dict[str, Any], forwarded: bool) -> str | None:
    marked = _marked(journal)
    if marked is not None:
        return marked
    code = outcome.get("code")
    if isinstance(code, int) and code in DECISION_BY_CODE:
        return DECISION_BY_CODE[code]
    data = outcome.get("data")
    if code == refusals.APPROVAL_REQUIRED and isinstance(data, dict) and data.get("reason") in APPROVAL_REASONS:
        return str(data["reason"])
    if forwarded:
        # A journaled run's result carries the journal's _meta; an error does not say, but it went upstream.
        return "run" if "error.type" in outcome else None
    if "code" in outcome:
        data = outcome.get("data")
        return "refused" if isinstance(data, dict) and "reason" in data else "replay"
    return None


def _marked(journal: dict[str, Any]) -> str | None:
    """The decision a result's own ``_meta`` marks state: settled by a probe, a caught repeat, a replay or a run."""
    if "settled" in journal:
        return "settled"
    if REPEAT_OF in journal:
        return "repeat"
    if "replayed" in journal:
        return "replay" if journal["replayed"] is True else "run"
    return None


def _duplicate_refusal(body: dict[str, Any]) -> bool:
    error = body.get("error")
    data = error.get("data") if isinstance(error, dict) else None
    return isinstance(data, dict) and data.get("reason") == "duplicate_request_id"
