"""Workflows that belong to principals: two people's agents on the same workflow id, through two replicas of a real
`checkpoint serve` on one real PostgreSQL journal, with real signed tokens. Each gets its own results and never
another's (no replay, no divergence, no wait), an operator sees both, and an agent's token never does."""

from __future__ import annotations

import concurrent.futures
import json
import subprocess
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

from gatewayproc import MODERN, GatewayProcess, effects_gateway, initialize, modern_call, request
from idp import JwksServer, Key, bearer, token_flags

from support import DEFAULT_TIMEOUT, checkpoint_argv, done_count, read_effects, wait_until

PATH = "/w/shared-id/mcp"
OPERATOR = ["--operator-scope", "checkpoint:operator"]


@contextmanager
def replicas(journal: str, tmp_path: Path, key: Key, count: int = 2) -> Iterator[list[GatewayProcess]]:
    with JwksServer(key) as jwks, ExitStack() as stack:
        flags = [*token_flags(jwks.url, extra=tuple(OPERATOR)), "--journal", journal]
        yield [stack.enter_context(effects_gateway(tmp_path, *flags)) for _ in range(count)]


def call(replica: GatewayProcess, token: str, ident: int, tool: str, arguments: dict[str, Any], **meta: Any) -> Any:
    headers = {**MODERN, **bearer(token)}
    reply = request(replica.port, "POST", PATH, modern_call(ident, tool, arguments, **meta), headers, timeout=60)
    assert reply.status == 200, reply.body
    return reply.message()


def journaled(answer: Any) -> dict[str, Any]:
    info: dict[str, Any] = answer["result"]["_meta"]["checkpoint/journal"]
    return info


def text(answer: Any) -> str:
    return str(answer["result"]["content"][0]["text"])


def test_two_principals_on_one_workflow_id_through_two_replicas_each_get_their_own_calls(
    pg_url: str, tmp_path: Path
) -> None:
    key = Key("k1", "RS256")
    alice, bob = key.token("alice"), key.token("bob")
    operator = key.token("ops-person", scope="openid checkpoint:operator")
    effects = tmp_path / "effects.jsonl"
    gate = tmp_path / "gate"
    with replicas(pg_url, tmp_path, key) as (a, b), concurrent.futures.ThreadPoolExecutor(1) as pool:
        first_alice = call(a, alice, 1, "send_email", {"to": "alice's boss"}, checkpoint_seq=1)
        first_bob = call(b, bob, 1, "send_email", {"to": "bob's boss"}, checkpoint_seq=1)
        # Same id, same sequence, different calls: each ran, in a workflow of its own (no divergence).
        assert text(first_alice) == "sent to alice's boss"
        assert text(first_bob) == "sent to bob's boss"
        assert journaled(first_alice)["workflow"] == "alice/shared-id"
        assert journaled(first_bob)["workflow"] == "bob/shared-id"
        # Sent again through the other replica, each gets its own result back as a replay, never the other's.
        again_alice = call(b, alice, 2, "send_email", {"to": "alice's boss"}, checkpoint_seq=1)
        again_bob = call(a, bob, 2, "send_email", {"to": "bob's boss"}, checkpoint_seq=1)
        assert (text(again_alice), journaled(again_alice)["replayed"]) == ("sent to alice's boss", True)
        assert (text(again_bob), journaled(again_bob)["replayed"]) == ("sent to bob's boss", True)
        # Bob sending alice's exact call is not a replay of hers: it runs, for him.
        copied = call(a, bob, 3, "send_email", {"to": "alice's boss"}, checkpoint_seq=2)
        assert (text(copied), journaled(copied)["replayed"]) == ("sent to alice's boss", False)
        # A call of alice's in flight at sequence 3 does not make bob's sequence 3 wait, nor refuse it.
        held = pool.submit(call, a, alice, 4, "gate", {"path": str(gate), "label": "alice"}, checkpoint_seq=3)
        wait_until(lambda: any(e["event"] == "started" for e in read_effects(effects)), what="alice's call to start")
        bobs_third = call(b, bob, 4, "send_email", {"to": "carol"}, checkpoint_seq=3)
        assert text(bobs_third) == "sent to carol"
        assert not held.done()
        gate.touch()
        assert text(held.result(timeout=DEFAULT_TIMEOUT)) == "gate passed"
        # The operator's pages show both; an agent's token never opens them; /metrics is the operator's too.
        pages = request(a.port, "GET", "/ui/", headers=bearer(operator))
        assert pages.status == 200
        assert b"alice/shared-id" in pages.body
        assert b"bob/shared-id" in pages.body
        assert b"<th>Principal</th>" in pages.body
        assert request(a.port, "GET", "/ui/", headers=bearer(alice)).status == 403
        assert request(b.port, "GET", "/metrics", headers=bearer(bob)).status == 403
        metrics = request(a.port, "GET", "/metrics", headers=bearer(operator))
        assert metrics.status == 200
        assert b'checkpoint_principal_calls_total{outcome="completed",principal="alice"} 2.0' in metrics.body
        assert b'checkpoint_principal_calls_total{outcome="replayed",principal="bob"} 1.0' in metrics.body
    assert done_count(effects, "send_email") == 4
    # The CLI (an operator's, with the database's credentials) sees both, and whose each is.
    listed = subprocess.run(
        checkpoint_argv("journal", "ls", "--journal", pg_url, "--json"),
        capture_output=True,
        text=True,
        timeout=DEFAULT_TIMEOUT,
        check=True,
    )
    owners = {w["workflow"]: w["principal"] for w in json.loads(listed.stdout)}
    assert owners == {"alice/shared-id": "alice", "bob/shared-id": "bob"}
    table = subprocess.run(
        checkpoint_argv("journal", "ls", "--journal", pg_url),
        capture_output=True,
        text=True,
        timeout=DEFAULT_TIMEOUT,
        check=True,
    ).stdout
    assert "PRINCIPAL" in table.splitlines()[0]
    shown = subprocess.run(
        checkpoint_argv("journal", "show", "--journal", pg_url, "bob/shared-id"),
        capture_output=True,
        text=True,
        timeout=DEFAULT_TIMEOUT,
        check=True,
    ).stdout
    assert "principal: bob" in shown


def test_a_session_answers_only_to_the_principal_that_opened_it(tmp_path: Path) -> None:
    key = Key("k1", "ES256")
    alice, bob = key.token("alice"), key.token("bob")
    with (
        JwksServer(key) as jwks,
        effects_gateway(tmp_path, *token_flags(jwks.url), "--journal", str(tmp_path / "j.db")) as gw,
    ):
        session = initialize(gw.port, headers=bearer(alice))
        ping = {"jsonrpc": "2.0", "id": 3, "method": "ping"}
        assert request(gw.port, "POST", "/mcp", ping, {"Mcp-Session-Id": session, **bearer(bob)}).status == 404
        assert request(gw.port, "DELETE", "/mcp", None, {"Mcp-Session-Id": session, **bearer(bob)}).status == 404
        assert request(gw.port, "POST", "/mcp", ping, {"Mcp-Session-Id": session, **bearer(alice)}).status == 200


def test_a_workflow_journaled_before_principals_is_nobodys(tmp_path: Path) -> None:
    journal = str(tmp_path / "j.db")
    with effects_gateway(tmp_path, "--journal", journal, "--workflow-id", "alice/run") as gw:
        reply = request(gw.port, "POST", "/mcp", modern_call(1, "send_email", {"to": "x"}), MODERN)
        assert reply.status == 200
    key = Key("k1", "RS256")
    with JwksServer(key) as jwks, effects_gateway(tmp_path, *token_flags(jwks.url), "--journal", journal) as gw:
        # alice's workflow "run" would be journaled as "alice/run", which someone journaled without a principal:
        # it is refused rather than handed to her with its calls.
        headers = {**MODERN, **bearer(key.token("alice"))}
        refused = request(gw.port, "POST", "/w/run/mcp", modern_call(1, "send_email", {"to": "y"}), headers)
        assert refused.status == 403
        assert "not yours" in refused.json()["error"]["message"]
    assert done_count(tmp_path / "effects.jsonl") == 1


def test_a_limit_per_principal_counts_each_persons_calls_over_all_their_workflows(pg_url: str, tmp_path: Path) -> None:
    """``scope = "principal"``: two calls an hour for each person, whatever workflow and replica they use; one
    person's spent allowance leaves the other's whole."""
    key = Key("k1", "RS256")
    alice, bob = key.token("alice"), key.token("bob")
    policy = tmp_path / "policy.toml"
    policy.write_text('[tools.send_email]\nlimit = { calls = 2, per = "1h", scope = "principal" }\n', encoding="utf-8")
    with JwksServer(key) as jwks, ExitStack() as stack:
        flags = [*token_flags(jwks.url), "--journal", pg_url, "--policy", str(policy)]
        a, b = (stack.enter_context(effects_gateway(tmp_path, *flags)) for _ in range(2))

        def send(replica: GatewayProcess, token: str, workflow: str, ident: int) -> Any:
            body = modern_call(ident, "send_email", {"to": f"user{ident}"})
            reply = request(replica.port, "POST", f"/w/{workflow}/mcp", body, {**MODERN, **bearer(token)}, timeout=60)
            assert reply.status == 200, reply.body
            return reply.message()

        alices = [send(a, alice, "one", 1), send(b, alice, "two", 2), send(a, alice, "three", 3)]
        bobs = [send(b, bob, "one", 4), send(a, bob, "one", 5)]
    assert ["result" in answer for answer in alices] == [True, True, False]
    assert alices[2]["error"]["data"]["reason"] == "limit"
    assert "for this principal" in alices[2]["error"]["message"]
    assert all("result" in answer for answer in bobs)
    assert done_count(tmp_path / "effects.jsonl", "send_email") == 4


def test_a_principal_whose_name_holds_a_slash_never_reaches_another_principals_workflow(tmp_path: Path) -> None:
    """Alice's default workflow is journaled as ``alice/<journal path>``; a token whose subject is ``alice/`` + the
    journal's folder, asking for the workflow named like the journal's file, would make the very same id out of
    another pair. It gets a workflow of its own: nothing of alice's is replayed to it, its call runs for it."""
    key = Key("k1", "RS256")
    journal = tmp_path / "j.db"
    alice, mallory = key.token("alice"), key.token(f"alice/{tmp_path}")
    with JwksServer(key) as jwks, effects_gateway(tmp_path, *token_flags(jwks.url), "--journal", str(journal)) as gw:

        def send(token: str, path: str, ident: int) -> Any:
            body = modern_call(ident, "send_email", {"to": "alice's boss"}, checkpoint_seq=1)
            reply = request(gw.port, "POST", path, body, {**MODERN, **bearer(token)})
            assert reply.status == 200, reply.body
            return reply.message()

        hers = send(alice, "/mcp", 1)
        assert journaled(hers)["workflow"] == f"alice/{journal}"
        theirs = send(mallory, f"/w/{journal.name}/mcp", 2)
        assert (text(theirs), journaled(theirs)["replayed"]) == ("sent to alice's boss", False)
        assert journaled(theirs)["workflow"] == f"alice%2F{str(tmp_path).replace('/', '%2F')}/{journal.name}"
        again = send(alice, "/mcp", 3)  # alice's own is still hers, and replayed to her
        assert journaled(again)["replayed"] is True
    assert done_count(tmp_path / "effects.jsonl", "send_email") == 2
