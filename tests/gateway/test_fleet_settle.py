"""A fleet of `checkpoint serve` replicas on PostgreSQL under a tool policy: a replica SIGKILLed mid-call leaves its
call in doubt, and another replica, meeting it again, settles it by the probe or the idempotency key."""

from __future__ import annotations

import contextlib
import random
import threading
import time
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import pytest

from checkpoint_mcp.intercept.settle_rules import idempotency_key
from checkpoint_mcp.journal import open_journal
from checkpoint_mcp.journal.records import CallState
from gatewayproc import MODERN, GatewayProcess, modern_call, request
from ledger import POLICY, ledger, step, verified

from support import server_cmd

WORKFLOW = "fleet-settle"
PATH = f"/w/{WORKFLOW}/mcp"
KILLS = 12


def replica(pg_url: str, tmp_path: Path, policy: Path) -> GatewayProcess:
    env = {"LEDGER_DIR": str(tmp_path), "LEDGER_DELAY_MS": "60"}
    command = server_cmd("ledger_server.py")
    return GatewayProcess("--upstream-cmd", command, "--journal", pg_url, "--policy", str(policy), env=env)


def settled_call(replicas: list[GatewayProcess], n: int, ident: int) -> dict[str, Any]:
    """Call step ``n`` until a live replica answers it with a result (a dead replica's liveness lock may take a
    moment to go: until then its call is in flight, not in doubt, and is refused, not run)."""
    tool, arguments = step(n)
    deadline = time.monotonic() + 30
    while True:
        target = random.choice([r for r in replicas if r.proc.poll() is None])
        reply = request(target.port, "POST", PATH, modern_call(ident, tool, arguments, checkpoint_seq=n), MODERN, 60)
        message = reply.message()
        if "result" in message:
            return message["result"]
        assert time.monotonic() < deadline, message
        time.sleep(0.2)


@pytest.mark.timeout(600)
def test_a_replica_killed_mid_call_has_its_call_settled_by_another_replica(pg_url: str, tmp_path: Path) -> None:
    policy = tmp_path / "policy.toml"
    policy.write_text(POLICY.format(probe="list_outbox"))
    rng = random.Random(7)
    with ExitStack() as stack:
        replicas = [stack.enter_context(replica(pg_url, tmp_path, policy)) for _ in range(3)]
        for n in range(1, KILLS + 1):
            victim = rng.choice(replicas)
            tool, arguments = step(n)
            body = modern_call(1000 + n, tool, arguments, checkpoint_seq=n)
            threading.Thread(target=lambda port=victim.port, b=body: _quietly(port, b), daemon=True).start()
            time.sleep(rng.uniform(0.01, 0.15))
            victim.kill()
            replicas.remove(victim)
            settled_call(replicas, n, 2000 + n)
            replicas.append(stack.enter_context(replica(pg_url, tmp_path, policy)))
        for n in range(1, KILLS + 1):  # every step replays now, from any replica
            settled_call(replicas, n, 3000 + n)

    entries = ledger(tmp_path)
    for n in range(1, KILLS + 1):
        tool, arguments = step(n)
        if tool == "send_email":
            assert sum(1 for e in entries if e["tool"] == tool and e["to"] == arguments["to"]) == 1, n
        else:
            charged = [e for e in entries if e["tool"] == tool and e["customer"] == arguments["customer"]]
            assert [e["event"] for e in charged].count("done") == 1, n
            assert {e["key"] for e in charged} == {idempotency_key(WORKFLOW, n, None)}
    journal = open_journal(pg_url, create=False)
    try:
        rows = journal.calls(WORKFLOW)
        audit = journal.resolutions(WORKFLOW)
    finally:
        journal.close()
    assert [row.seq for row in rows] == list(range(1, KILLS + 1))
    assert all(row.state is CallState.COMPLETED for row in rows)
    settled = [r for r in audit if r.user.startswith("checkpoint (")]
    assert settled  # replicas settled the calls their dead neighbours left in doubt
    verified(pg_url)


def _quietly(port: int, body: dict[str, Any]) -> None:
    with contextlib.suppress(OSError):  # the replica is killed under it
        request(port, "POST", PATH, body, MODERN, 30)
