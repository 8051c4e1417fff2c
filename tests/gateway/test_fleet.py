"""A fleet: several `checkpoint serve` replicas on one real PostgreSQL journal, no affinity in front of them."""

from __future__ import annotations

import concurrent.futures
import json
import os
import random
import subprocess
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

import psycopg

from checkpoint_mcp.journal.records import CallState
from checkpoint_mcp.refusals import IN_DOUBT
from gatewayproc import MODERN, GatewayProcess, effects_gateway, modern_call, request
from ledger import verified
from pgserver import PgServer

from support import DEFAULT_TIMEOUT, checkpoint_argv, done_count, journal_states, read_effects, wait_until

WORKFLOW = "fleet"
PATH = f"/w/{WORKFLOW}/mcp"


@contextmanager
def fleet(pg_url: str, tmp_path: Path, size: int = 3) -> Iterator[list[GatewayProcess]]:
    with ExitStack() as stack:
        yield [stack.enter_context(effects_gateway(tmp_path, "--journal", pg_url)) for _ in range(size)]


def call(
    replica: GatewayProcess, ident: Any, tool: str, arguments: dict[str, Any], path: str = PATH, **meta: Any
) -> Any:
    reply = request(replica.port, "POST", path, modern_call(ident, tool, arguments, **meta), MODERN, timeout=60)
    assert reply.status == 200, reply.body
    return reply.message()


def health(replica: GatewayProcess) -> dict[str, Any]:
    reply = request(replica.port, "GET", "/healthz")
    return {"status_code": reply.status, **json.loads(reply.body)}


def started(effects: Path, label: str) -> bool:
    return any(e["event"] == "started" and e["arguments"].get("label") == label for e in read_effects(effects))


def test_calls_sprayed_at_random_replicas_each_run_once_and_replay_anywhere(pg_url: str, tmp_path: Path) -> None:
    rng = random.Random(11)
    # One workflow whose agent names its calls by sequence, one whose agent names them by key.
    calls = [({"to": f"s{i}"}, PATH, {"checkpoint_seq": i + 1}) for i in range(12)]
    calls += [({"to": f"k{i}"}, "/w/fleet-keys/mcp", {"checkpoint_key": f"key-{i}"}) for i in range(12)]
    rng.shuffle(calls)
    with fleet(pg_url, tmp_path) as replicas, concurrent.futures.ThreadPoolExecutor(8) as pool:

        def spray(ident: int) -> list[Any]:
            return list(pool.map(lambda c: call(rng.choice(replicas), ident, "send_email", c[0], c[1], **c[2]), calls))

        first, again = spray(1), spray(2)
    for one, two, (arguments, _, _) in zip(first, again, calls, strict=True):
        assert "result" in one, one
        assert one["result"]["content"][0]["text"] == f"sent to {arguments['to']}"
        assert one["result"]["_meta"]["checkpoint/journal"]["replayed"] is False
        assert two["result"]["_meta"]["checkpoint/journal"]["replayed"] is True
        assert two["result"]["content"] == one["result"]["content"]
    assert done_count(tmp_path / "effects.jsonl") == len(calls)
    for workflow in (WORKFLOW, "fleet-keys"):
        states = journal_states(pg_url, workflow)
        assert len(states) == 12  # keys took distinct sequences, whichever replica served them
        if workflow == WORKFLOW:
            assert sorted(states) == list(range(1, 13))
        else:  # from blocks of the shared counter: a block's unused rest is a gap
            assert min(states) == 1
        assert set(states.values()) == {CallState.COMPLETED}
    verified(pg_url)  # three replicas appended to each chain at once: it is still one chain


def test_a_re_sent_call_joins_the_original_running_on_another_replica(pg_url: str, tmp_path: Path) -> None:
    effects = tmp_path / "effects.jsonl"
    with fleet(pg_url, tmp_path, 2) as (a, b), concurrent.futures.ThreadPoolExecutor(1) as pool:
        original = pool.submit(call, a, 1, "slow", {"seconds": 1.5, "label": "j"}, checkpoint_key="order-1")
        wait_until(lambda: started(effects, "j"), what="the original to start on replica a")
        resent = call(b, 2, "slow", {"seconds": 1.5, "label": "j"}, checkpoint_key="order-1")
        first = original.result(timeout=DEFAULT_TIMEOUT)
        # A different call at the sequence in flight on a live replica: in flight, not in doubt, and not joined.
        seq = first["result"]["_meta"]["checkpoint/journal"]["seq"]
        assert seq == 1
    assert resent["id"] == 2
    assert resent["result"]["content"] == first["result"]["content"]
    assert resent["result"]["_meta"]["checkpoint/journal"]["replayed"] is True
    assert done_count(effects, "slow") == 1


def test_a_different_call_at_a_sequence_running_on_another_replica_is_refused_as_in_flight(
    pg_url: str, tmp_path: Path
) -> None:
    effects = tmp_path / "effects.jsonl"
    gate = tmp_path / "gate"  # the original runs until the test creates this file, however slow the machine
    with fleet(pg_url, tmp_path, 2) as (a, b), concurrent.futures.ThreadPoolExecutor(1) as pool:
        original = pool.submit(call, a, 1, "gate", {"path": str(gate), "label": "d"}, checkpoint_seq=5)
        wait_until(lambda: started(effects, "d"), what="the original to start on replica a")
        refused = call(b, 2, "send_email", {"to": "eve"}, checkpoint_seq=5)
        # Nor may an operator resolve a call that a live replica is running.
        resolve = subprocess.run(
            checkpoint_argv("journal", "resolve", "--journal", pg_url, WORKFLOW, "5", "--release"),
            capture_output=True,
            text=True,
            timeout=DEFAULT_TIMEOUT,
            check=False,
        )
        assert not original.done()
        gate.touch()
        assert "result" in original.result(timeout=DEFAULT_TIMEOUT)
        replica_a = health(a)["replica"]
    assert refused["error"]["code"] == IN_DOUBT
    assert refused["error"]["data"]["reason"] == "in_flight"
    assert refused["error"]["data"]["replica"] == replica_a
    assert done_count(effects, "send_email") == 0
    assert resolve.returncode == 1
    assert "in flight on the live replica" in resolve.stderr
    assert journal_states(pg_url, WORKFLOW) == {5: CallState.COMPLETED}


def test_a_replica_killed_mid_call_leaves_its_call_in_doubt_and_the_others_unaffected(
    pg_url: str, tmp_path: Path
) -> None:
    effects = tmp_path / "effects.jsonl"
    with fleet(pg_url, tmp_path) as (a, b, c), concurrent.futures.ThreadPoolExecutor(1) as pool:
        doomed = pool.submit(call, c, 1, "slow", {"seconds": 5, "label": "k"}, checkpoint_seq=1)
        wait_until(lambda: started(effects, "k"), what="the call to start on replica c")
        c.proc.kill()
        c.proc.wait(timeout=DEFAULT_TIMEOUT)
        assert doomed.exception(timeout=DEFAULT_TIMEOUT) is not None  # its client lost the connection
        in_doubt = call(a, 2, "slow", {"seconds": 5, "label": "k"}, checkpoint_seq=1)
        assert in_doubt["error"]["code"] == IN_DOUBT
        assert in_doubt["error"]["data"]["reason"] == "in_doubt"
        others = [call(r, 3 + i, "send_email", {"to": f"o{i}"}, checkpoint_seq=2 + i) for i, r in enumerate((a, b))]
        assert all("result" in o for o in others)
    assert done_count(effects, "slow") == 0  # the upstream died with its replica (never finished)
    assert journal_states(pg_url, WORKFLOW) == {1: CallState.PENDING, 2: CallState.COMPLETED, 3: CallState.COMPLETED}
    verified(pg_url)


def test_postgres_restarted_under_load_reexecutes_nothing_and_the_fleet_carries_on(
    pg_server: PgServer, pg_url: str, tmp_path: Path
) -> None:
    effects = tmp_path / "effects.jsonl"
    with fleet(pg_url, tmp_path, 2) as replicas, concurrent.futures.ThreadPoolExecutor(4) as pool:
        slow = [
            pool.submit(call, replicas[i % 2], i, "slow", {"seconds": 2, "label": f"r{i}"}, checkpoint_seq=i + 1)
            for i in range(4)
        ]
        wait_until(lambda: all(started(effects, f"r{i}") for i in range(4)), what="calls in flight")
        pg_server.restart()
        across = [future.result(timeout=60) for future in slow]
        wait_until(lambda: all(health(r)["status_code"] == 200 for r in replicas), timeout=30, what="liveness back")
        after = [call(replicas[i % 2], 10 + i, "send_email", {"to": f"a{i}"}, checkpoint_seq=10 + i) for i in range(4)]
        replays = [
            call(replicas[(i + 1) % 2], 20 + i, "slow", {"seconds": 2, "label": f"r{i}"}, checkpoint_seq=i + 1)
            for i in range(4)
        ]
        stderr = "".join(r.stderr for r in replicas)
    for reply in [*across, *after]:
        assert "result" in reply, reply
    assert all(r["result"]["_meta"]["checkpoint/journal"]["replayed"] for r in replays)
    assert "is live again" in stderr
    assert done_count(effects) == 8
    assert set(journal_states(pg_url, WORKFLOW).values()) == {CallState.COMPLETED}


def test_a_replica_whose_database_sessions_are_killed_comes_back_live_and_keeps_its_calls(
    pg_server: PgServer, pg_url: str, tmp_path: Path
) -> None:
    effects = tmp_path / "effects.jsonl"
    with fleet(pg_url, tmp_path, 2) as (a, b), concurrent.futures.ThreadPoolExecutor(1) as pool:
        replica_a = health(a)["replica"]
        original = pool.submit(call, a, 1, "slow", {"seconds": 2, "label": "h"}, checkpoint_seq=1)
        wait_until(lambda: started(effects, "h"), what="the call to start on replica a")
        with psycopg.connect(pg_server.url(), autocommit=True) as admin:
            killed = admin.execute(
                "SELECT count(*) FROM (SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
                " WHERE application_name = %s) AS t",
                (f"checkpoint serve {replica_a}",),
            ).fetchone()
        assert killed == (2,)  # its journal connection and its liveness connection: as if its host had died
        wait_until(lambda: "lost its liveness connection" in a.stderr, what="replica a to notice")
        wait_until(lambda: health(a)["status_code"] == 200, timeout=30, what="replica a to be live again")
        assert health(a)["replica"] == replica_a  # the same replica, with its lock back
        joined = call(b, 2, "slow", {"seconds": 2, "label": "h"}, checkpoint_seq=1)
        first = original.result(timeout=DEFAULT_TIMEOUT)
    assert "result" in first
    assert joined["result"]["content"] == first["result"]["content"]
    assert done_count(effects, "slow") == 1


def test_replicas_given_the_audit_key_write_a_keyed_chain_that_only_the_key_verifies(
    pg_url: str, tmp_path: Path
) -> None:
    key = {"CHECKPOINT_TEST_AUDIT_KEY": "fleet-audit-key"}
    with ExitStack() as stack:
        replicas = [
            stack.enter_context(
                effects_gateway(tmp_path, "--journal", pg_url, "--audit-key-env", "CHECKPOINT_TEST_AUDIT_KEY", env=key)
            )
            for _ in range(2)
        ]
        for i in range(6):
            assert "result" in call(replicas[i % 2], i, "send_email", {"to": f"a{i}"}, checkpoint_seq=i + 1)

    def verify(*extra: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
        argv = checkpoint_argv("journal", "verify", "--journal", pg_url, WORKFLOW, "--json", *extra)
        return subprocess.run(
            argv, capture_output=True, text=True, timeout=60, check=False, env={**os.environ, **(env or {})}
        )

    keyed = verify("--audit-key-env", "CHECKPOINT_TEST_AUDIT_KEY", env=key)
    assert keyed.returncode == 0, keyed.stdout + keyed.stderr
    [report] = json.loads(keyed.stdout)["workflows"]
    assert (report["links"], report["keyed"], report["unchecked"]) == (12, 12, 0)
    wrong = verify("--audit-key-env", "CHECKPOINT_TEST_AUDIT_KEY", env={"CHECKPOINT_TEST_AUDIT_KEY": "not it"})
    assert wrong.returncode == 1
    assert json.loads(wrong.stdout)["workflows"][0]["breaks"][0]["kind"] == "edited"
