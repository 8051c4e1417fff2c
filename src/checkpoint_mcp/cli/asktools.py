"""Asking a project's servers for their tools, for `checkpoint init` (which may not import a transport itself).

Each server is started (or reached) as its client would: a stdio entry by the platform's shell in its folder with the
entry's ``env`` over ours; an HTTP entry at its URL with its headers. A client variable in any of these
(``${VAR}``, ``${VAR:-default}``, ``${env:VAR}``, ``${workspaceFolder}``) is expanded from our environment the
way the client would; one we cannot expand (an unset variable, a VS Code ``${input:…}``) means the server cannot
be asked now, and says so. All servers are asked at once, each bounded by the timeout, so init waits at most
about one timeout however many servers there are.
"""

from __future__ import annotations

import asyncio
import os
import re
from collections.abc import Mapping, Sequence
from typing import Any, Final

from checkpoint_mcp.errors import CheckpointError
from checkpoint_mcp.init.clients import HttpEntry
from checkpoint_mcp.init.policies import Listing, Server, ToolLister
from checkpoint_mcp.platforms import commands

_VARIABLE: Final = re.compile(r"\$\{([^}]*)\}")
_NAME: Final = re.compile(r"(?:env:)?([A-Za-z_][A-Za-z0-9_]*)(?::-(.*))?", re.DOTALL)


class Unexpandable(CheckpointError):
    """A client variable that cannot be expanded at init (its value is not known here)."""


def asker(timeout: float) -> ToolLister:
    """The ``ToolLister`` `checkpoint init` uses: every server asked at once, each within ``timeout`` seconds."""

    def tools_of(servers: Sequence[Server]) -> dict[str, Listing | str]:
        if not servers:
            return {}
        return asyncio.run(_ask_all(servers, os.environ, timeout))

    return tools_of


async def _ask_all(servers: Sequence[Server], environ: Mapping[str, str], timeout: float) -> dict[str, Listing | str]:
    answers = await asyncio.gather(*(_ask(server, environ, timeout) for server in servers))
    return {server.name: answer for server, answer in zip(servers, answers, strict=True)}


async def _ask(server: Server, environ: Mapping[str, str], timeout: float) -> Listing | str:
    """The server's ``serverInfo`` and tools, or a sentence saying why it could not be asked."""
    from checkpoint_mcp.upstream.client import server_and_tools_of

    try:
        upstream = _upstream(server, environ, timeout)
        server_info, tools = await server_and_tools_of(upstream, timeout)
        return Listing(tools, server_info)
    except CheckpointError as exc:
        return str(exc)
    except OSError as exc:
        return f"it could not be started: {exc.strerror or exc}"


def _upstream(server: Server, environ: Mapping[str, str], timeout: float) -> Any:
    """The upstream for ``server``, nothing sent yet.

    Raises:
        Unexpandable: a client variable in the entry has no value here.
        UsageError: an HTTP entry's settings cannot work.
        OSError: the stdio server's shell could not be started.
    """
    workspace = server.cwd
    if isinstance(server.shape, HttpEntry):
        from checkpoint_mcp.config import RemoteConfig
        from checkpoint_mcp.upstream.http.settings import open_remote

        headers = tuple(f"{name}: {expand(value, environ, workspace)}" for name, value in server.shape.headers)
        config = RemoteConfig(url=expand(server.shape.url, environ, workspace), headers=headers, timeout=timeout)
        # The headers are expanded already; open_remote's own ${VAR} pass then finds nothing left to expand.
        return open_remote(config, {})
    from checkpoint_mcp.upstream.stdio.child import ChildUpstream
    from checkpoint_mcp.upstream.stdio.process import spawn_quiet

    argv = [expand(word, environ, workspace) for word in (server.shape.command, *server.shape.args)]
    env = {**environ, **{name: expand(value, environ, workspace) for name, value in server.env.items()}}
    return ChildUpstream(spawn_quiet(commands.join(argv), env, server.cwd))


def expand(text: str, environ: Mapping[str, str], workspace: str) -> str:
    """``text`` with its client variables expanded from ``environ`` (``${workspaceFolder}``: ``workspace``).

    Raises:
        Unexpandable: a variable is unset and has no default, or is of a kind only the client knows.
    """

    def one(match: re.Match[str]) -> str:
        inner = match.group(1)
        if inner == "workspaceFolder":
            return workspace
        found = _NAME.fullmatch(inner)
        if found is None:
            raise Unexpandable(f"${{{inner}}} is known only to the client")
        name, default = found.group(1), found.group(2)
        if name in environ:
            return environ[name]
        if default is not None:
            return default
        raise Unexpandable(f"${{{name}}} is not set here")

    return _VARIABLE.sub(one, text)
