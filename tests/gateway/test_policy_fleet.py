"""Tool policies on a fleet: two `checkpoint serve` replicas on one real PostgreSQL journal catch a repeat by
its content whichever replica each call reaches."""

from __future__ import annotations

import concurrent.futures
import threading
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

import psycopg

from checkpoint_mcp.journal.records import CallState
from checkpoint_mcp.refusals import LIMIT_REACHED, REPEAT_REFUSED
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


def test_a_reworded_call_sent_to_both_replicas_at_once_runs_once_under_match(pg_url: str, tmp_path: Path) -> None:
    """The two calls differ in their body, so not in their signature: the lookup, and the advisory lock that
    serializes it across replicas, take the identity the policy names (/to, /subject)."""
    rounds = 10
    effects = tmp_path / "effects.jsonl"
    policy = '[tools.send_email]\nrepeat = "refuse"\nmatch = ["/to", "/subject"]\n'
    answers: list[list[Any]] = []
    with fleet(pg_url, tmp_path, policy) as replicas, concurrent.futures.ThreadPoolExecutor(2) as pool:
        for n in range(rounds):
            barrier = threading.Barrier(2)
            futures = [
                pool.submit(
                    fire,
                    barrier,
                    replica,
                    2 * n + i,
                    "send_email",
                    {"to": f"bob{n}@example.com", "subject": f"Invoice {n}", "body": f"wording {i}"},
                )
                for i, replica in enumerate(replicas)
            ]
            answers.append([future.result(timeout=DEFAULT_TIMEOUT) for future in futures])
    done = [e for e in read_effects(effects) if e["event"] == "done"]
    for n in range(rounds):
        ran = [e for e in done if e["arguments"]["subject"] == f"Invoice {n}"]
        assert len(ran) == 1, f"round {n}: the upstream ran the call {len(ran)} times: {answers[n]}"
        assert sum("result" in a for a in answers[n]) == 1, answers[n]


def asked_events(pg_url: str) -> int:
    with psycopg.connect(pg_url) as conn:
        row = conn.execute(
            "SELECT count(*) FROM events WHERE kind = %s AND detail LIKE %s", ("repeat", "%confirm_asked%")
        ).fetchone()
        return int(row[0]) if row else 0


def test_a_confirmation_sent_to_both_replicas_at_once_runs_once(pg_url: str, tmp_path: Path) -> None:
    """The refusal asked for one confirmation: the first replica to take it (in the transaction that reserves
    the call, which re-reads the question under the identity's lock) runs it; the other is refused, asking again."""
    rounds = 8
    effects = tmp_path / "effects.jsonl"
    policy = '[tools.send_email]\nrepeat = "confirm"\nmatch = ["/to"]\n'
    answers: list[list[Any]] = []
    questions = 0  # refusals that asked for a confirmation, durable in the journal
    with fleet(pg_url, tmp_path, policy) as (a, b), concurrent.futures.ThreadPoolExecutor(2) as pool:
        for n in range(rounds):
            to = f"bob{n}@example.com"
            call(a, 10 * n, "send_email", {"to": to, "body": "first"})
            asked = call(b, 10 * n + 1, "send_email", {"to": to, "body": "second"})
            assert asked["error"]["data"]["reason"] == "confirm"
            # A refusal is answered before its event commits (with the replica's next batch); the race under
            # test is between the two confirmations, so both must be able to see the question first.
            questions += 1
            wait_until(lambda q=questions: asked_events(pg_url) == q, what="the refusal's question to be durable")
            barrier = threading.Barrier(2)
            futures = [
                pool.submit(fire, barrier, replica, 10 * n + 2 + i, "send_email", {"to": to, "body": f"confirm {i}"})
                for i, replica in enumerate((a, b))
            ]
            pair = [future.result(timeout=DEFAULT_TIMEOUT) for future in futures]
            answers.append(pair)
            questions += sum("error" in answer for answer in pair)  # a loser's refusal asks again
            wait_until(lambda q=questions: asked_events(pg_url) == q, what="the losers' questions to be durable")
    for n, pair in enumerate(answers):
        assert sum("result" in answer for answer in pair) == 1, f"round {n}: {pair}"
    assert done_count(effects, "send_email") == 2 * rounds


def test_replicas_racing_on_a_limit_and_a_budget_run_no_more_than_they_allow(pg_url: str, tmp_path: Path) -> None:
    """Eight calls at one moment, split over the two replicas, under a limit of three calls (send_quiet) and a
    budget of 100 spent 30 at a time (send_email): the count (or the sum) and the reservation are one transaction
    in the shared journal, so together the replicas run three of each, and refuse the rest."""
    policy = (
        '[tools.send_quiet]\nlimit = { calls = 3, per = "1h" }\n'
        '[tools.send_email]\nbudget = { sum = "/amount", max = 100, per = "1h" }\n'
    )
    effects = tmp_path / "effects.jsonl"
    with fleet(pg_url, tmp_path, policy) as replicas, concurrent.futures.ThreadPoolExecutor(8) as pool:
        for tool, arguments in (("send_quiet", lambda n: {"n": n}), ("send_email", lambda n: {"n": n, "amount": 30})):
            barrier = threading.Barrier(8)
            futures = [
                pool.submit(fire, barrier, replicas[n % 2], 100 + n if tool == "send_email" else n, tool, arguments(n))
                for n in range(8)
            ]
            answers = [future.result(timeout=DEFAULT_TIMEOUT * 2) for future in futures]
            ran = [answer for answer in answers if "result" in answer]
            refused = [answer for answer in answers if answer.get("error", {}).get("code") == LIMIT_REACHED]
            assert (len(ran), len(refused)) == (3, 5), answers
            assert done_count(effects, tool) == 3
