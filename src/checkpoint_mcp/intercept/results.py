"""The edits the proxy makes to results it only routes: the server identity (``--name``/``--version``) in the
handshake and in 2026-07-28 ``_meta``, and what ``tools/list`` says of each tool's annotations."""

from __future__ import annotations

import logging
from typing import Any

from checkpoint_mcp.intercept.inflight import InFlight, Track
from checkpoint_mcp.wire import Message, dumps, member_text, set_member

logger = logging.getLogger(__name__)

SERVER_INFO_META = "io.modelcontextprotocol/serverInfo"
_SERVER_INFO_NEEDLE = b'"io.modelcontextprotocol/serverInfo"'


class PlainResults:
    """Rewrites the identity in results and remembers which tools are read-only."""

    def __init__(self, name: str, version: str) -> None:
        self._identity = {"name": name, "version": version}
        self.read_only: dict[str, bool] = {}
        """Tool name → its ``readOnlyHint`` from the last ``tools/list`` (for ``--trust-annotations``)."""

    def with_identity(self, line: bytes) -> bytes:
        """The line with ``--name``/``--version`` in its result's ``_meta`` server info, if it has one (2026-07-28
        servers may put it in every result, not only in ``server/discover``'s)."""
        if _SERVER_INFO_NEEDLE not in line:
            return line
        try:
            text = line.decode()
            path = ("result", "_meta", SERVER_INFO_META)
            info = member_text(text, path)
            if info is None or not info.startswith("{"):
                return line
            for key, value in self._identity.items():
                text = set_member(text, (*path, key), dumps(value))
        except ValueError:
            logger.warning("could not set the server identity in a result")
            return line
        return text.encode()

    def plain_result(self, entry: InFlight, message: Message, line: bytes) -> bytes:
        result = message.body.get("result")
        if not isinstance(result, dict):
            return line
        if entry.track is Track.TOOLS_LIST:
            self._remember_annotations(result.get("tools"))
            return line
        try:
            text = line.decode()
            if entry.track is Track.INITIALIZE:
                for key, value in self._identity.items():
                    text = set_member(text, ("result", "serverInfo", key), dumps(value))
                return text.encode()
            if entry.track is Track.DISCOVER:
                for key, value in self._identity.items():
                    text = set_member(text, ("result", "_meta", SERVER_INFO_META, key), dumps(value))
                return text.encode()
        except ValueError:
            logger.warning("could not set the server identity in a %s result", entry.track.value)
        return line

    def _remember_annotations(self, tools: Any) -> None:
        if not isinstance(tools, list):
            return
        for tool in tools:
            if isinstance(tool, dict) and isinstance(tool.get("name"), str):
                annotations = tool.get("annotations")
                hint = annotations.get("readOnlyHint") if isinstance(annotations, dict) else None
                self.read_only[tool["name"]] = hint is True
