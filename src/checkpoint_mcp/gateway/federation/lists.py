"""What the federation answers from all its members at once: their lists merged (``tools/list``, ``prompts/list``,
``resources/templates/list``, ``resources/list``), ``initialize`` and 2026-07-28's ``server/discover``.

Every member that runs (or may be started) is asked, each page of a list followed; one that does not answer is left
out, with a warning. Names are prefixed ``<upstream>__<name>`` (``upstreams_file.SEPARATOR``); a resource keeps its
URI, and which upstream serves it is remembered (``Resources``) for the requests routed by URI.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable
from typing import Any

from checkpoint_mcp.gateway.channel import Channel
from checkpoint_mcp.gateway.federation import replies
from checkpoint_mcp.gateway.federation.members import Member, Members
from checkpoint_mcp.gateway.federation.own_requests import AskFailed, ask
from checkpoint_mcp.gateway.upstreams_file import MAX_LISTED_NAME, prefixed
from checkpoint_mcp.refusals import UPSTREAM_EXITED, UPSTREAM_REFUSED
from checkpoint_mcp.wire import Message

logger = logging.getLogger(__name__)

MAX_PAGES = 50  # pages of one list followed per member
LISTS = {"tools/list": "tools", "prompts/list": "prompts", "resources/templates/list": "resourceTemplates"}
"""The lists whose items are named, so prefixed; ``resources/list`` is merged too, its URIs as they are."""
UNREACHED = frozenset({UPSTREAM_REFUSED, UPSTREAM_EXITED})
"""The gateway's own answers that say an upstream could not be reached or died: it is left out until it answers."""


def merged(method: str) -> bool:
    """Whether the federation answers ``method`` by asking every member and merging their lists."""
    return method in LISTS or method == "resources/list"


class Resources:
    """Which upstream serves a resource: the URIs and the templates' fixed starts its lists named."""

    def __init__(self) -> None:
        self._uris: dict[str, str] = {}  # a resource's URI -> its upstream
        self._templates: list[tuple[str, str]] = []  # (a template's fixed start, its upstream)

    def learn(self, method: str, upstream: str, items: Any) -> None:
        """Remember which upstream serves the resources (or templates) of one of its lists."""
        for item in items if isinstance(items, list) else []:
            if not isinstance(item, dict):
                continue
            if method == "resources/list" and isinstance(item.get("uri"), str):
                self._uris[item["uri"]] = upstream
            elif method == "resources/templates/list" and isinstance(item.get("uriTemplate"), str):
                start = (item["uriTemplate"].split("{", 1)[0], upstream)
                if start not in self._templates:
                    self._templates.append(start)

    def owner_of(self, uri: str) -> str | None:
        """The upstream whose list named ``uri``, else whose template's fixed start is the longest that fits."""
        if uri in self._uris:
            return self._uris[uri]
        fitting = [(len(start), name) for start, name in self._templates if start and uri.startswith(start)]
        return max(fitting)[1] if fitting else None


class Gatherer:
    """Asks every member of one federation the same request."""

    def __init__(self, members: Members, ids: Callable[[], str], resources: Resources) -> None:
        self._members = members
        self._ids = ids
        self.resources = resources

    async def gather(self, method: str, params: dict[str, Any]) -> dict[str, dict[str, Any]]:
        """Ask every member that runs (or may be started) ``method``; their results, by member. A member that does
        not answer is left out, with a warning."""

        async def one(member: Member) -> tuple[str, dict[str, Any] | None]:
            if not await self._members.ready(member):
                return member.name, None
            assert member.channel is not None
            try:
                if merged(method):
                    return member.name, await self._all_pages(member.channel, method, params)
                return member.name, await ask(member.channel, method, params, self._ids())
            except AskFailed as exc:
                if exc.code in UNREACHED:
                    self._members.unreached(member, str(exc))
                else:  # it answered: it only has no such list
                    logger.debug("upstream %s has no %s: %s", member.name, method, exc)
                return member.name, None
            except Exception as exc:
                self._members.unreached(member, f"no answer to {method}: {exc or type(exc).__name__}")
                return member.name, None

        found = await asyncio.gather(*(one(member) for member in self._members))
        return {name: result for name, result in found if result is not None}

    async def _all_pages(self, channel: Channel, method: str, params: dict[str, Any]) -> dict[str, Any]:
        field = LISTS.get(method, "resources")
        items: list[Any] = []
        cursor: Any = None
        for _ in range(MAX_PAGES):
            page = await ask(channel, method, {**params, **({"cursor": cursor} if cursor else {})}, self._ids())
            found = page.get(field)
            items.extend(found if isinstance(found, list) else [])
            cursor = page.get("nextCursor")
            if not cursor:
                break
        return {field: items}

    async def learn_resources(self, message: Message) -> None:
        """Ask every member its resources and templates, to learn which serves what (a client may read a
        resource before it lists them)."""
        for method in ("resources/list", "resources/templates/list"):
            for upstream, answer in (await self.gather(method, replies.envelope(message))).items():
                self.resources.learn(method, upstream, answer.get(LISTS.get(method, "resources"), []))

    async def listed(self, message: Message, server_info: dict[str, str]) -> bytes:
        """The answer to a list request: every member's items, names prefixed (a name too long with its prefix
        is left out, with an error in the log)."""
        method = message.method or ""
        field = LISTS.get(method, "resources")
        items: list[Any] = []
        for name, answer in (await self.gather(method, replies.envelope(message))).items():
            self.resources.learn(method, name, answer.get(field, []))
            for item in answer.get(field, []):
                if not isinstance(item, dict):
                    continue
                if method == "resources/list":
                    items.append(item)
                    continue
                listed = prefixed(name, str(item.get("name", "")))
                if len(listed) > MAX_LISTED_NAME:
                    logger.error("%s %r of upstream %s is left out: over %d characters", field, listed, name, 64)
                    continue
                items.append({**item, "name": listed})
        result: dict[str, Any] = {field: items}
        if replies.modern(message):  # 2026-07-28 results say how long they may be cached: not at all
            result.update(cacheScope="private", resultType="complete", ttlMs=0)
            result["_meta"] = {"io.modelcontextprotocol/serverInfo": server_info}
        return replies.result(message, result)

    async def discovered(self, message: Message, server_info: dict[str, str]) -> bytes:
        """The answer to 2026-07-28's ``server/discover``: the members' versions and capabilities, merged."""
        params = message.params if isinstance(message.params, dict) else {}
        answers = await self.gather("server/discover", params)
        versions = sorted({v for a in answers.values() for v in a.get("supportedVersions", []) if isinstance(v, str)})
        result = {
            "supportedVersions": versions or ["2026-07-28"],
            "capabilities": merged_capabilities(answers.values()),
            "cacheScope": "private",
            "ttlMs": 0,
            "resultType": "complete",
            "_meta": {"io.modelcontextprotocol/serverInfo": server_info},
        }
        return replies.result(message, result)


def initialized(message: Message, asked: dict[str, Any] | None, answers: dict[str, dict[str, Any]], info: Any) -> bytes:
    """The answer to the client's ``initialize`` from the members' own answers (``asked``: the client's params):
    the oldest protocol version among them, their capabilities merged, their instructions each under its name,
    the gateway's own ``serverInfo``."""
    versions = sorted(str(a.get("protocolVersion")) for a in answers.values() if a.get("protocolVersion"))
    result: dict[str, Any] = {
        "protocolVersion": versions[0] if versions else (asked or {}).get("protocolVersion") or "2025-06-18",
        "capabilities": merged_capabilities(answers.values()),
        "serverInfo": info,
    }
    instructions = [f"[{name}] {a['instructions']}" for name, a in answers.items() if a.get("instructions")]
    if instructions:
        result["instructions"] = "\n\n".join(instructions)
    return replies.result(message, result)


def merged_capabilities(answers: Iterable[dict[str, Any]]) -> dict[str, Any]:
    """The union of the members' capabilities (a flag is on when any member has it); tools always, and their list
    may change (upstreams come and go)."""
    merged_: dict[str, Any] = {"tools": {"listChanged": True}}
    for answer in answers:
        capabilities = answer.get("capabilities")
        if not isinstance(capabilities, dict):
            continue
        for name, value in capabilities.items():
            if isinstance(value, dict):
                target = merged_.setdefault(name, {})
                if isinstance(target, dict):
                    for key, flag in value.items():
                        target[key] = (target.get(key) is True) or flag if isinstance(flag, bool) else flag
            else:
                merged_.setdefault(name, value)
    merged_["tools"]["listChanged"] = True
    return merged_
