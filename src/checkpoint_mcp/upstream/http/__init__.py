"""A remote upstream over HTTP: Streamable HTTP in both eras (``remote``), the 2024-11-05 HTTP+SSE fallback
(``http_sse``), how one exchange ends (``exchange``), the event-stream parser (``sse``), MCP's routing headers
(``headers``) and OAuth through the SDK's provider (``oauth``). Bytes are relayed verbatim; nothing is re-sent."""
