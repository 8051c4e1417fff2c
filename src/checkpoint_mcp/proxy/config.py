"""The proxy's settings, as given on the command line."""

from __future__ import annotations

from typing import Literal, NamedTuple


class ProxyConfig(NamedTuple):
    """Everything `checkpoint --upstream-cmd …` was told; see the README's flags table."""

    upstream_cmd: str
    journal: str | None = None
    workflow_id: str | None = None
    on_divergence: Literal["strict", "fork"] = "strict"
    trust_annotations: bool = False
    redact_args: bool = False
    replay_from_start: bool = False
    server_name: str = "checkpoint"
    server_version: str = "0.0.0"
