"""What a message from the client is, as far as HTTP cares, and the MCP headers that go with it.

The 2026-07-28 revision mirrors parts of each request into HTTP headers so that intermediaries can route without
reading bodies: ``MCP-Protocol-Version`` (also sent, once negotiated, by the handshake era), ``Mcp-Method``,
``Mcp-Name`` (the tool or prompt name, the resource URI) and ``Mcp-Param-*`` for the tool arguments a tool's input
schema marks with ``x-mcp-header``. The proxy learns those marks from the ``tools/list`` results it relays.
"""

from __future__ import annotations

import base64
import re
from typing import Any, NamedTuple

from checkpoint_mcp.wire import PROTOCOL_VERSION_META, Kind, WireParseError, classify, id_key

HANDSHAKE_VERSIONS = frozenset({"2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"})
NAME_PARAMS = {"tools/call": "name", "prompts/get": "name", "resources/read": "uri"}
_HEADER_SAFE = re.compile(r"[\x20-\x7E]*")
_B64_SENTINEL = re.compile(r"=\?base64\?.*\?=")


class OutgoingMessage(NamedTuple):
    """One line from the client, classified for HTTP."""

    kind: Kind
    method: str | None
    ident: Any
    key: tuple[str, Any] | None  # ``id_key`` of a request's id
    params: Any
    body: bytes  # the line without its newline: the POST body, byte for byte
    version: str | None  # the 2026-07-28-era protocol version named in the request's ``_meta``

    @property
    def label(self) -> str:
        """Words for logs: ``tools/call request``, ``response``."""
        kinds = {Kind.REQUEST: "request", Kind.NOTIFICATION: "notification", Kind.RESPONSE: "response"}
        kind = kinds.get(self.kind, "message")
        return f"{self.method} {kind}" if self.method else kind


def read_outgoing(line: bytes) -> OutgoingMessage:
    """Classify one line from the client.

    Raises:
        WireParseError: it is not JSON.
    """
    message = classify(line)
    params = message.params
    version = None
    if isinstance(params, dict) and isinstance(params.get("_meta"), dict):
        named = params["_meta"].get(PROTOCOL_VERSION_META)
        if isinstance(named, str) and named not in HANDSHAKE_VERSIONS:
            version = named
    key = id_key(message.id) if message.kind is Kind.REQUEST else None
    return OutgoingMessage(message.kind, message.method, message.id, key, params, line.rstrip(b"\r\n"), version)


def encode_header_value(value: str) -> str:
    """A value as an HTTP field: verbatim if it is plain printable ASCII, else in the ``=?base64?…?=`` form."""
    if _HEADER_SAFE.fullmatch(value) and value == value.strip() and not _B64_SENTINEL.fullmatch(value):
        return value
    return f"=?base64?{base64.b64encode(value.encode()).decode('ascii')}?="


class McpHeaders:
    """The negotiated version and the tools' ``x-mcp-header`` marks, learned from the answers relayed."""

    def __init__(self) -> None:
        self._negotiated: str | None = None
        self._param_maps: dict[str, dict[tuple[str, ...], str]] = {}

    def version_header(self) -> dict[str, str]:
        """``MCP-Protocol-Version`` of the handshake era, once ``initialize`` negotiated one."""
        return {"mcp-protocol-version": self._negotiated} if self._negotiated else {}

    def for_message(self, message: OutgoingMessage) -> dict[str, str]:
        """The MCP headers of one POST."""
        if message.version is None:
            return {} if message.method == "initialize" else self.version_header()
        headers = {"mcp-protocol-version": message.version}
        if message.method is None:
            return headers
        headers["mcp-method"] = message.method
        params = message.params if isinstance(message.params, dict) else {}
        name_key = NAME_PARAMS.get(message.method)
        if name_key is not None and isinstance(params.get(name_key), str):
            headers["mcp-name"] = encode_header_value(params[name_key])
        if message.method == "tools/call" and isinstance(params.get("name"), str):
            header_map = self._param_maps.get(params["name"])
            arguments = params.get("arguments")
            if header_map and isinstance(arguments, dict):
                from mcp.shared.inbound import mcp_param_headers

                headers.update(mcp_param_headers(header_map, arguments))
        return headers

    def learn(self, message: OutgoingMessage, line: bytes) -> None:
        """Remember what an answer tells about later requests' headers."""
        if message.method == "initialize":
            result = result_of(line)
            if result is not None and isinstance(result.get("protocolVersion"), str):
                self._negotiated = result["protocolVersion"]
        elif message.method == "tools/list" and b"x-mcp-header" in line:
            result = result_of(line)
            if result is not None and isinstance(result.get("tools"), list):
                self._remember_param_headers(result["tools"])

    def _remember_param_headers(self, tools: list[Any]) -> None:
        # The SDK's own schema walk, imported only for servers that use the feature (it costs ~0.5 s of imports).
        from mcp.shared.inbound import find_invalid_x_mcp_header, x_mcp_header_map

        for tool in tools:
            if not isinstance(tool, dict) or not isinstance(tool.get("name"), str):
                continue
            schema = tool.get("inputSchema")
            if find_invalid_x_mcp_header(schema) is None:
                self._param_maps[tool["name"]] = x_mcp_header_map(schema)


def result_of(line: bytes) -> dict[str, Any] | None:
    """The ``result`` object of a response line; None for anything else (an error, a request, not JSON)."""
    try:
        parsed = classify(line)
    except WireParseError:
        return None
    result = parsed.body.get("result") if parsed.kind is Kind.RESPONSE else None
    return result if isinstance(result, dict) else None
