"""Everything `checkpoint` and `checkpoint serve` were told about journaling: the ``ProxyConfig`` the interceptor,
the two pumps and their runners read.

It lives in the interceptor's room because it carries the tool policies, which decide what happens to a call; the
transports read only the plain settings of ``config`` (how to reach a remote upstream), never this.
"""

from __future__ import annotations

from typing import Literal, NamedTuple

from checkpoint_mcp.config import RemoteConfig
from checkpoint_mcp.intercept.policy import Policy


class ProxyConfig(NamedTuple):
    """Everything `checkpoint` was told; see the README's flags table. Exactly one of ``upstream_cmd`` and
    ``remote`` is set."""

    upstream_cmd: str | None
    journal: str | None = None
    workflow_id: str | None = None
    on_divergence: Literal["strict", "fork"] = "strict"
    trust_annotations: bool = False
    redact_args: bool = False
    replay_from_start: bool = False
    server_name: str = "checkpoint"
    server_version: str = "0.0.0"
    remote: RemoteConfig | None = None
    relaxed_completions: bool = False  # outcomes committed without a sync (SQLite); PENDING rows always synced
    audit_key_env: str | None = None  # the variable holding the hash chain's key (--audit-key-env)
    policy: Policy | None = None  # --policy: the tool policies (None: every tool as without a policy)
    tool_prefix: str = ""  # behind `serve --upstreams`: what the client sees before this upstream's tool names
