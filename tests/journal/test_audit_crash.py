"""No false alarm: proxies SIGKILLed at every named point and at random moments, forks, resolutions, gc and a v3
journal's migration all leave a chain that `checkpoint journal verify` passes."""

from __future__ import annotations

import json
import random
import time
from pathlib import Path

from test_audit import verify
from test_cli import cli
from test_migration import write_v3_journal

from support import ProxyProcess, effects_proxy, server_cmd

POINTS = ("after_pending_commit", "after_forward", "after_upstream_reply", "after_complete_commit")


def assert_verifies(journal: str) -> None:
    code, report = verify(journal)
    assert code == 0, json.dumps(report, indent=1)


def start(journal: str, tmp_path: Path, *extra: str, trigger: str | None = None) -> ProxyProcess:
    return effects_proxy(journal, tmp_path, "--workflow-id", "wf", *extra, trigger=trigger)


def test_a_kill_loop_then_resolutions_and_gc_never_raise_a_false_alarm(journal: str, tmp_path: Path) -> None:
    rng = random.Random(20)
    for round_ in range(8):
        point = POINTS[round_ % len(POINTS)]
        with start(journal, tmp_path, trigger=point) as doomed:
            doomed.send(
                {
                    "jsonrpc": "2.0",
                    "id": 1,
                    "method": "tools/call",
                    "params": {"name": "send_email", "arguments": {"to": f"{point}-{round_}"}},
                }
            )
            assert doomed.wait() == -9
        assert_verifies(journal)
        # Calls streaming in, and a SIGKILL at a moment nobody chose.
        with start(journal, tmp_path) as busy:
            for i in range(6):
                busy.send(
                    {
                        "jsonrpc": "2.0",
                        "id": 100 + i,
                        "method": "tools/call",
                        "params": {"name": "send_email", "arguments": {"to": f"r{round_}-{i}"}},
                    }
                )
            time.sleep(rng.uniform(0.0, 0.15))
            busy.kill()
        assert_verifies(journal)
    # A divergent call forks a branch; both chains verify.
    with start(journal, tmp_path, "--on-divergence", "fork") as p:
        p.call("send_email", {"to": "someone else"}, seq=1)
        p.close()
    assert_verifies(journal)
    # Every call left in doubt is resolved one way or another.
    pending = [
        c
        for line in cli(journal, "export", "wf").stdout.splitlines()
        if (c := json.loads(line))["type"] == "call" and c["state"] == "PENDING"
    ]
    assert pending, "the kill loop left nothing in doubt: it did not kill mid-call"
    (tmp_path / "result.json").write_text('{"content":[]}')
    for index, call in enumerate(pending):
        how = [
            ["--completed", "--result-file", str(tmp_path / "result.json")],
            ["--failed", "--message", "gone"],
            ["--release"],
        ][index % 3]
        cli(journal, "resolve", "wf", str(call["seq"]), *how)
    assert_verifies(journal)
    cli(journal, "gc", "--older-than", "0s")
    assert_verifies(journal)


def test_a_migrated_v3_journal_verifies_through_calls_resolutions_and_gc(tmp_path: Path) -> None:
    path = tmp_path / "j.db"
    write_v3_journal(path)
    effects = {"EFFECTS_FILE": str(tmp_path / "effects.jsonl")}
    with ProxyProcess(
        "--upstream-cmd", server_cmd("effects_server.py"), "--journal", str(path), "--workflow-id", "wf", env=effects
    ) as p:
        p.call("send_email", {"to": "c"})
        p.close()
    code, report = verify(str(path))
    [wf] = report["workflows"]
    assert (code, wf["start"], wf["rows"]) == (0, "migration", 3)
    cli(str(path), "resolve", "wf", "2", "--failed", "--message", "never sent")  # the v2 call left in doubt
    assert_verifies(str(path))
    cli(str(path), "gc", "--older-than", "0s")
    assert_verifies(str(path))
