"""Traces and metrics by the OpenTelemetry conventions for MCP: the one seam between Checkpoint and OpenTelemetry.

Off unless the operator turns it on with the standard ``OTEL_*`` environment variables (an OTLP endpoint:
``OTEL_EXPORTER_OTLP_ENDPOINT``, or ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT``/``…_METRICS_ENDPOINT`` for one signal;
``OTEL_TRACES_EXPORTER=none``/``OTEL_METRICS_EXPORTER=none`` drop one, ``OTEL_SDK_DISABLED=true`` both) *and*
the optional extra ``checkpoint-mcp[otel]`` is installed. Off, this package imports nothing of OpenTelemetry and
``Telemetry.session`` returns None, so the pumps keep the plain interceptor: the hot path pays nothing at all.

On, ``sdk.py`` (the SDK behind this seam, imported only then) builds the providers from the same variables
(``OTEL_SERVICE_NAME``, ``OTEL_TRACES_SAMPLER``, ``OTEL_BSP_*``, ``OTEL_PROPAGATORS`` …), and each pump gets a
``CallTrace`` that watches the lines crossing its interceptor:

* a request from the client opens a SERVER span, ``{mcp.method.name} {target}`` (``tools/call send_email``),
  whose parent is the request's ``params._meta.traceparent`` (SEP-414) or, over HTTP, the ``traceparent`` header;
* the request leaving for the upstream opens a CLIENT span below it (the upstream exchange); over HTTP its
  context goes upstream in a ``traceparent`` header (``headers_for``). Over stdio the request's bytes stay
  verbatim (the DESIGN's rule on edits), so a stdio upstream sees the client's own ``_meta.traceparent``;
* a journal commit the message waited for is a child span of its own;
* the answer reaching the client ends the SERVER span with the outcome: ``error.type`` (the JSON-RPC code, or
  ``tool_error``), and ``checkpoint.workflow``, ``checkpoint.seq``, ``checkpoint.decision`` read off the
  journal's own ``_meta`` and error data.

Tool arguments and results are recorded only when ``CHECKPOINT_OTEL_RECORD_CONTENT=1``, and never under
``--redact-args-in-journal``.

May import: the standard library here; ``wire``, ``errors`` and OpenTelemetry in ``sdk.py`` only. Used by the
interceptor (``intercept/traced.py``), the pumps (``proxy/``, ``gateway/``) and, through a callback they hand it,
the HTTP upstream; it imports none of them.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any, NamedTuple, Protocol

logger = logging.getLogger(__name__)

RECORD_CONTENT_VARIABLE = "CHECKPOINT_OTEL_RECORD_CONTENT"
"""Set to ``1`` to record tool arguments and results in spans (opt-in; ignored under --redact-args-in-journal)."""


class Peer(NamedTuple):
    """Where the pump's messages come from and go to, as the conventions' attributes say it."""

    client_transport: str  # ``pipe`` (the stdio proxy) or ``tcp`` (checkpoint serve)
    upstream_transport: str  # ``pipe`` (a child over stdio) or ``tcp`` (--upstream-url)
    server_address: str | None = None  # the real upstream's host, for --upstream-url
    server_port: int | None = None
    principal: str | None = None  # whose requests these are (checkpoint serve with an identity provider)


def peer(client_transport: str, upstream_url: str | None) -> Peer:
    """Who a pump's client and upstream are: ``client_transport`` (``pipe`` or ``tcp``), and the upstream's URL
    for ``--upstream-url`` (None: a child over stdio)."""
    if upstream_url is None:
        return Peer(client_transport, "pipe")
    from urllib.parse import urlsplit

    url = urlsplit(upstream_url)
    return Peer(client_transport, "tcp", url.hostname, url.port or (443 if url.scheme == "https" else 80))


class CallTrace(Protocol):
    """What one interceptor's traffic tells the tracer (all called on the event loop, never concurrently).

    Each method takes the complete lines that crossed one boundary, in order, as the interceptor saw or released
    them; it never changes them. ``commit`` is the ``(start, end)`` of the journal commit, in nanoseconds since
    the epoch, that the lines waited for (None when they waited for none).
    """

    def from_client(self, lines: list[bytes], carrier: Mapping[str, str] | None = None) -> None:
        """Lines from the client, before routing; ``carrier`` holds the HTTP ``traceparent``/``tracestate``."""

    def to_upstream(self, lines: list[bytes], commit: tuple[int, int] | None = None) -> None:
        """Lines released to the upstream."""

    def from_upstream(self, lines: list[bytes]) -> None:
        """Lines from the upstream, before routing."""

    def to_client(self, lines: list[bytes], commit: tuple[int, int] | None = None) -> None:
        """Lines released to the client (answers end their requests' spans)."""

    def headers_for(self, key: tuple[str, Any] | None) -> dict[str, str]:
        """The trace-context headers for the upstream exchange of the request with this ``id_key`` (HTTP)."""


class Telemetry:
    """The process's tracer and meter: off (the default, ``Telemetry()``) or backed by the OpenTelemetry SDK."""

    enabled = False

    def session(self, peer: Peer, *, journaled: bool = False, redact_args: bool = False) -> CallTrace | None:
        """A trace for one interceptor's traffic (``journaled``: it journals tools/calls, so their spans say what
        the journal decided), or None when telemetry is off."""
        return None

    def shutdown(self) -> None:
        """Export what is buffered and stop (bounded by the exporters' timeouts); nothing when off."""


OFF = Telemetry()


def wanted(environ: Mapping[str, str]) -> tuple[bool, bool]:
    """Whether the environment asks for traces, and for metrics: an OTLP endpoint for them is set (the common one
    or their own), their ``OTEL_*_EXPORTER`` is not ``none``, and ``OTEL_SDK_DISABLED`` is not ``true``."""
    if environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return False, False
    common = bool(environ.get("OTEL_EXPORTER_OTLP_ENDPOINT", "").strip())

    def asked(signal: str) -> bool:
        exporter = environ.get(f"OTEL_{signal}_EXPORTER", "otlp").strip().lower()
        endpoint = common or bool(environ.get(f"OTEL_EXPORTER_OTLP_{signal}_ENDPOINT", "").strip())
        return endpoint and exporter != "none"

    return asked("TRACES"), asked("METRICS")


def from_environ(environ: Mapping[str, str]) -> Telemetry:
    """The telemetry the ``OTEL_*`` variables of ``environ`` ask for: ``OFF`` unless they name an endpoint and
    the ``otel`` extra is installed (then the SDK is imported, and only then)."""
    traces, metrics = wanted(environ)
    if not (traces or metrics):
        return OFF
    try:
        from checkpoint_mcp.telemetry.sdk import SdkTelemetry
    except ImportError as exc:
        logger.warning(
            "OTEL_* variables are set but OpenTelemetry is not installed (pip install 'checkpoint-mcp[otel]'); "
            "no traces are exported: %s",
            exc,
        )
        return OFF
    record = environ.get(RECORD_CONTENT_VARIABLE, "").strip().lower() in ("1", "true", "yes")
    return SdkTelemetry(traces=traces, metrics=metrics, record_content=record)
