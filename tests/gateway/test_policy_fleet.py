"""Tool policies on a fleet: two `checkpoint serve` replicas on one real PostgreSQL journal catch a repeat by
its content whichever replica each call reaches."""

from __future__ import annotations

import concurrent.futures
import threading
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

from checkpoint_mcp.errors import REPEAT_REFUSED
from checkpoint_mcp.journal.base import CallState
from gatewayproc import MODERN, GatewayProcess, effects_gateway, modern_call, request

from support import DEFAULT_TIMEOUT, done_count, journal_calls, read_effects, wait_until

WORKFLOW = "policy-fleet"
PATH = f"/w/{WORKFLOW}/mcp"
MAIL = {"to": "bob@example.com", "subject": "Your invoice"}


@contextmanager
def fleet(pg_url: str, tmp_path: Path, policy: str) -> Iterator[list[GatewayProcess]]:
    path = tmp_path / "policy.toml"
    path.write_text(policy, encoding="utf-8")
    with ExitStack() as stack:
        yield [
            stack.enter_context(effects_gateway(tmp_path, "--journal", pg_url, "--policy", str(path))) for _ in range(2)
        ]


def call(replica: GatewayProcess, ident: Any, tool: str, arguments: dict[str, Any]) -> Any:
    reply = request(replica.port, "POST", PATH, modern_call(ident, tool, arguments), MODERN, timeout=60)
    assert reply.status == 200, reply.body
    return reply.message()


def test_a_repeat_sent_to_the_other_replica_is_replayed_or_refused_by_its_rule(pg_url: str, tmp_path: Path) -> None:
    policy = '[tools.send_email]\nrepeat = "replay"\n[tools.send_quiet]\nrepeat = "refuse"\n'
    with fleet(pg_url, tmp_path, policy) as (a, b):
        first = call(a, 1, "send_email", MAIL)
        replayed = call(b, 2, "send_email", MAIL)
        quiet = call(b, 3, "send_quiet", {"n": 1})
        refused = call(a, 4, "send_quiet", {"n": 1})
    assert first["result"]["_meta"]["checkpoint/journal"]["replayed"] is False
    assert replayed["result"]["content"] == first["result"]["content"]
    assert replayed["result"]["_meta"]["checkpoint/journal"]["repeatOf"]["seq"] == 1
    assert "result" in quiet
    assert refused["error"]["code"] == REPEAT_REFUSED
    assert refused["error"]["data"]["original"]["seq"] == quiet["result"]["_meta"]["checkpoint/journal"]["seq"]
    assert done_count(tmp_path / "effects.jsonl", "send_email") == 1
    assert done_count(tmp_path / "effects.jsonl", "send_quiet") == 1
    assert {r.state for r in journal_calls(pg_url, WORKFLOW)} == {CallState.COMPLETED}


def test_a_repeat_of_a_call_running_on_the_other_replica_joins_it(pg_url: str, tmp_path: Path) -> None:
    effects = tmp_path / "effects.jsonl"
    arguments = {"seconds": 1.5, "label": "r"}
    policy = '[default]\nrepeat = "replay"\n'
    with fleet(pg_url, tmp_path, policy) as (a, b), concurrent.futures.ThreadPoolExecutor(1) as pool:
        original = pool.submit(call, a, 1, "slow", arguments)
        wait_until(lambda: any(e["event"] == "started" for e in read_effects(effects)), what="the original to start")
        joined = call(b, 2, "slow", arguments)
        first = original.result(timeout=DEFAULT_TIMEOUT)
    assert joined["result"]["content"] == first["result"]["content"]
    assert joined["result"]["_meta"]["checkpoint/journal"]["replayed"] is True
    assert done_count(effects, "slow") == 1


def fire(barrier: threading.Barrier, replica: GatewayProcess, ident: int, tool: str, arguments: Any) -> Any:
    barrier.wait(timeout=DEFAULT_TIMEOUT)
    return call(replica, ident, tool, arguments)


def test_the_same_new_call_sent_to_both_replicas_at_once_runs_once(pg_url: str, tmp_path: Path) -> None:
    """Neither replica has committed its PENDING row when the other looks the call up: the lookup and the
    reservation are serialized per (workflow, signature) in the database, so the second sees the first's row."""
    rounds = 20
    effects = tmp_path / "effects.jsonl"
    policy = '[tools.send_email]\nrepeat = "replay"\n[tools.send_quiet]\nrepeat = "refuse"\n'
    answers: list[list[Any]] = []
    with fleet(pg_url, tmp_path, policy) as replicas, concurrent.futures.ThreadPoolExecutor(2) as pool:
        for n in range(rounds):
            tool = "send_email" if n % 2 == 0 else "send_quiet"
            arguments = {"to": f"bob{n}@example.com", "subject": f"Invoice {n}"}
            barrier = threading.Barrier(2)

            futures = [
                pool.submit(fire, barrier, replica, 2 * n + i, tool, arguments) for i, replica in enumerate(replicas)
            ]
            answers.append([future.result(timeout=DEFAULT_TIMEOUT) for future in futures])
    done = [e for e in read_effects(effects) if e["event"] == "done"]
    for n in range(rounds):
        ran = [e for e in done if e["arguments"]["subject"] == f"Invoice {n}"]
        assert len(ran) == 1, f"round {n}: the upstream ran the call {len(ran)} times: {answers[n]}"
        if n % 2 == 0:  # replay: both answers carry the one result
            texts = [a["result"]["content"] for a in answers[n]]
            assert texts[0] == texts[1], answers[n]
        else:  # refuse: one ran, the other was refused as a repeat (or joined the run in flight)
            assert any("result" in a for a in answers[n]), answers[n]
    assert {r.state for r in journal_calls(pg_url, WORKFLOW)} == {CallState.COMPLETED}
