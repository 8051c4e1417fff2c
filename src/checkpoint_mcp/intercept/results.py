"""The edits the proxy makes to results it only routes: the server identity (``--name``/``--version``) in the
handshake and in 2026-07-28 ``_meta``, and what ``tools/list`` says of each tool's annotations."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from checkpoint_mcp.errors import UsageError
from checkpoint_mcp.intercept.inflight import InFlight, Track
from checkpoint_mcp.wire import Message, dumps, member_text, set_member

if TYPE_CHECKING:
    from checkpoint_mcp.intercept.policy import Policy

logger = logging.getLogger(__name__)

SERVER_INFO_META = "io.modelcontextprotocol/serverInfo"
_SERVER_INFO_NEEDLE = b'"io.modelcontextprotocol/serverInfo"'


class PlainResults:
    """Rewrites the identity in results and remembers which tools are read-only."""

    def __init__(self, name: str, version: str, policy: Policy | None = None) -> None:
        self._identity = {"name": name, "version": version}
        self.read_only: dict[str, bool] = {}
        """Tool name → its ``readOnlyHint`` from the last ``tools/list`` (for ``--trust-annotations``)."""
        self._policy = policy
        self._warned: set[str] = set()
        self._listed: dict[str, dict[str, Any]] = {}
        self.policy_refused: str | None = None
        """Set when a ``tools/list`` shows the policy cannot be used (a probe's tool is not read-only)."""

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
            self._check_policy(result.get("tools"), last_page="nextCursor" not in result)
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

    def _check_policy(self, tools: Any, last_page: bool) -> None:
        """The policy against the upstream's tools, pages gathered: a refusal as soon as a probe's tool is listed
        without ``readOnlyHint: true`` (and not declared read-only), and on the last page a warning, once, for
        each tool the policy names that no page listed."""
        if self._policy is None or not isinstance(tools, list) or self.policy_refused is not None:
            return
        self._listed.update({tool["name"]: tool for tool in tools if isinstance(tool, dict) and "name" in tool})
        try:
            warnings = self._policy.check_tools(self._listed.values(), complete=last_page)
        except UsageError as exc:
            self.policy_refused = str(exc)
            return
        for warning in warnings if last_page else ():
            if warning not in self._warned:
                self._warned.add(warning)
                logger.warning("%s", warning)
