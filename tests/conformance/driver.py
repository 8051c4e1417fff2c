"""A scripted MCP client for the official conformance suite's client scenarios, with or without Checkpoint.

``driver.py URL`` talks to the scenario's server directly with the official SDK client (Streamable HTTP, the
SDK's OAuth provider when the server asks for authorization). ``driver.py --through-checkpoint URL`` runs the
same script over stdio through ``checkpoint --upstream-url URL --upstream-auth oauth``, opening the URL the
proxy prints on stderr as a person's browser would. The suite passes the scenario in
``MCP_CONFORMANCE_SCENARIO``. The script: connect, list the tools, call each one with arguments made from its
input schema, answer elicitations with the schema's defaults, and close.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import threading
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import anyio
import httpx2
import mcp_types as types
from mcp.client import Client
from mcp.client.auth import OAuthClientProvider
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.auth import AuthorizationCodeResult, OAuthClientInformationFull, OAuthClientMetadata, OAuthToken

SAMPLE = {"string": "conformance", "integer": 1, "number": 1, "boolean": True}


def arguments_for(schema: dict[str, Any]) -> dict[str, Any]:
    """Arguments a tool accepts: each required property gets its default or a sample of its type."""
    properties = schema.get("properties") or {}
    out: dict[str, Any] = {}
    for name in schema.get("required") or []:
        spec = properties.get(name) or {}
        out[name] = spec.get("default", SAMPLE.get(spec.get("type", "string"), "conformance"))
    return out


async def elicit_defaults(context: Any, params: Any) -> types.ElicitResult:
    schema = getattr(params, "requested_schema", None) or {}
    content = {name: spec["default"] for name, spec in (schema.get("properties") or {}).items() if "default" in spec}
    return types.ElicitResult(action="accept", content=content)


async def script(server: Any) -> None:
    async with Client(server, mode="legacy", elicitation_callback=elicit_defaults) as client:
        with anyio.fail_after(60):
            tools = await client.list_tools()
            for tool in tools.tools:
                await client.call_tool(tool.name, arguments_for(tool.input_schema))


class MemoryTokens:
    """The SDK's TokenStorage, in memory (one run)."""

    def __init__(self) -> None:
        self.tokens: OAuthToken | None = None
        self.client: OAuthClientInformationFull | None = None

    async def get_tokens(self) -> OAuthToken | None:
        return self.tokens

    async def set_tokens(self, tokens: OAuthToken) -> None:
        self.tokens = tokens

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        return self.client

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        self.client = client_info


def direct(url: str) -> Any:
    """Streamable HTTP with the SDK's OAuth provider; the authorization URL is followed like a browser would."""
    found: dict[str, str] = {}

    async def redirect(authorization_url: str) -> None:
        async with httpx2.AsyncClient() as http:
            response = await http.get(authorization_url, follow_redirects=False)
        query = parse_qs(urlsplit(response.headers["location"]).query)
        found.update({key: values[0] for key, values in query.items()})

    async def callback() -> AuthorizationCodeResult:
        return AuthorizationCodeResult(code=found["code"], state=found.get("state"), iss=found.get("iss"))

    metadata = OAuthClientMetadata(
        client_name="conformance-driver",
        redirect_uris=["http://127.0.0.1:1/callback"],  # type: ignore[list-item]
        grant_types=["authorization_code", "refresh_token"],
        response_types=["code"],
    )
    auth = OAuthClientProvider(url, metadata, MemoryTokens(), redirect, callback)
    return streamable_http_client(url, http_client=httpx2.AsyncClient(auth=auth, timeout=30))


def through_checkpoint(url: str, state: Path) -> Any:
    """Stdio through `checkpoint --upstream-url`; a thread opens the URL the proxy asks for on stderr."""
    read_fd, write_fd = os.pipe()
    errlog = os.fdopen(write_fd, "w")

    def watch() -> None:
        asked = False
        with os.fdopen(read_fd, "r") as lines:
            for line in lines:
                sys.stderr.write(line)
                if asked and line.startswith("http"):
                    httpx2.get(line.strip(), follow_redirects=True, timeout=30)
                asked = "open this URL" in line

    threading.Thread(target=watch, daemon=True).start()
    argv = ["-m", "checkpoint_mcp", "--upstream-url", url, "--upstream-auth", "oauth", "--log-level", "info"]
    argv += ["--journal", str(state / "journal.db")]
    env = {**os.environ, "XDG_STATE_HOME": str(state)}
    return stdio_client(StdioServerParameters(command=sys.executable, args=argv, env=env), errlog=errlog)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--through-checkpoint", action="store_true")
    parser.add_argument("url")
    options = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="conformance-") as state:
        server = through_checkpoint(options.url, Path(state)) if options.through_checkpoint else direct(options.url)
        anyio.run(script, server)
    return 0


if __name__ == "__main__":
    sys.exit(main())
