"""Tool policies behind one real `checkpoint serve --upstreams … --trust-annotations`: nothing an agent sends or
an upstream says gets around them. Two upstreams (the effects server twice, ``a`` and ``b``, each counting its side
effects in a file of its own) under policies of their own, called in 2026-07-28's shape, sharing one gateway."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from checkpoint_mcp.refusals import APPROVAL_REQUIRED, LIMIT_REACHED
from gatewayproc import MODERN, GatewayProcess, modern_call, request

from support import done_count, read_effects, server_cmd

A_POLICY = """
[tools.send_email]
limit = { calls = 1, per = "1h", scope = "journal" }
[tools.send_quiet]
budget = { sum = "/amount", max = 100, per = "24h" }
[tools.lookup]
approve = "operator"
"""
B_POLICY = """
[tools.send_email]
limit = { calls = 1, per = "1h", scope = "journal" }
"""


class Federated:
    def __init__(self, gateway: GatewayProcess, folder: Path) -> None:
        self.gateway = gateway
        self.folder = folder
        self._ids = 0

    def send(self, method: str, params: dict[str, Any], workflow: str = "run") -> Any:
        self._ids += 1
        meta = {"io.modelcontextprotocol/protocolVersion": "2026-07-28"}
        body = {"jsonrpc": "2.0", "id": self._ids, "method": method, "params": {**params, "_meta": meta}}
        if method == "tools/call":
            body = modern_call(self._ids, params["name"], params["arguments"])
        reply = request(self.gateway.port, "POST", f"/w/{workflow}/mcp", body, MODERN, timeout=60)
        assert reply.status in (200, 400), reply.body
        return reply.message()

    def call(self, tool: str, arguments: dict[str, Any], workflow: str = "run") -> Any:
        return self.send("tools/call", {"name": tool, "arguments": arguments}, workflow)

    def effects(self, upstream: str) -> Path:
        return self.folder / f"{upstream}.jsonl"


@pytest.fixture(scope="module")
def federated(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Federated]:
    folder = tmp_path_factory.mktemp("federated")
    (folder / "a.toml").write_text(A_POLICY, encoding="utf-8")
    (folder / "b.toml").write_text(B_POLICY, encoding="utf-8")
    command = json.dumps(server_cmd("effects_server.py"))
    upstreams = folder / "upstreams.toml"
    upstreams.write_text(
        "".join(
            f'[upstreams.{name}]\ncommand = {command}\nenv = {{ EFFECTS_FILE = "{folder / name}.jsonl" }}\n'
            f'policy = "{name}.toml"\n'
            for name in ("a", "b")
        ),
        encoding="utf-8",
    )
    flags = ["--upstreams", str(upstreams), "--journal", str(folder / "j.db"), "--trust-annotations"]
    with GatewayProcess(*flags) as gateway:
        yield Federated(gateway, folder)


def error(answer: Any) -> dict[str, Any]:
    assert "error" in answer, answer
    found: dict[str, Any] = answer["error"]
    return found


def test_a_budget_amount_that_is_negative_or_too_large_for_a_float_is_refused_and_counted_nowhere(
    federated: Federated,
) -> None:
    """``budget = { sum = "/amount", max = 100 }``: -1e9 would have bought a billion of room, a 400-digit integer
    was a traceback and -32603. Both are refused before the upstream (-31091, ``budget_amount``), and the 100 the
    budget allows is all there for the calls after them."""
    huge = int("9" * 400)
    for amount in (-1e9, -1, huge, "100"):
        refused = error(federated.call("a__send_quiet", {"amount": amount}))
        assert refused["code"] == LIMIT_REACHED, refused
        assert refused["data"]["reason"] == "budget_amount"
        assert "An amount is a number, 0 or more, that fits a 64-bit float" in refused["message"]
    assert "result" in federated.call("a__send_quiet", {"amount": 60})
    assert "result" in federated.call("a__send_quiet", {"amount": 40})
    over = error(federated.call("a__send_quiet", {"amount": 0.5}))
    assert (over["data"]["reason"], over["data"]["spent"]) == ("budget", 100)
    assert done_count(federated.effects("a"), "send_quiet") == 2


def test_limits_behind_upstreams_count_each_upstreams_tool_apart(federated: Federated) -> None:
    """``a__send_email`` and ``b__send_email`` are two tools: a limit of one call an hour over the whole journal
    lets each run once (not one of them), and the refusal names the tool as the client sees it."""
    assert "result" in federated.call("a__send_email", {"to": "ann"})
    assert "result" in federated.call("b__send_email", {"to": "ann"}, workflow="other")
    again = error(federated.call("a__send_email", {"to": "bob"}, workflow="other"))
    assert (again["code"], again["data"]["reason"], again["data"]["tool"]) == (LIMIT_REACHED, "limit", "a__send_email")
    assert done_count(federated.effects("a"), "send_email") == 1
    assert done_count(federated.effects("b"), "send_email") == 1


def test_an_upstreams_read_only_hint_never_waives_the_operators_rule(federated: Federated) -> None:
    """With ``--trust-annotations``, ``lookup`` (``readOnlyHint: true``) passes unjournaled where the policy says
    nothing of it (b), and waits for a person's approval where the policy says ``approve = "operator"`` (a)."""
    tools = {tool["name"] for tool in federated.send("tools/list", {})["result"]["tools"]}
    assert {"a__lookup", "b__lookup"} <= tools
    plain = federated.call("b__lookup", {"key": "k"})
    assert plain["result"]["content"][0]["text"] == "value of k"
    assert "checkpoint/journal" not in plain["result"].get("_meta", {})  # the hint filled in what b's policy left
    asked = error(federated.call("a__lookup", {"key": "k"}))
    assert asked["code"] == APPROVAL_REQUIRED
    assert [e["tool"] for e in read_effects(federated.effects("a")) if e["event"] == "read"] == []
