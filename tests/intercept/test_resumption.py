"""Ways to resume: --on-divergence fork, idempotency keys, --replay-from-start; across real restarts."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from checkpoint_mcp.journal import open_journal
from checkpoint_mcp.journal.base import Journal
from checkpoint_mcp.journal.records import CallState
from checkpoint_mcp.refusals import DIVERGENCE, IN_DOUBT, INVALID_PARAMS

from support import ProxyProcess, done_count, effects_proxy, read_effects


def start(journal: str, tmp_path: Path, *extra: str, trigger: str | None = None) -> ProxyProcess:
    return effects_proxy(journal, tmp_path, "--workflow-id", "wf", *extra, trigger=trigger)


def open_j(location: str) -> Journal:
    return open_journal(location)


def keyed(p: ProxyProcess, name: str, arguments: dict[str, Any], key: str, seq: int | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"checkpoint_key": key}
    if seq is not None:
        meta["checkpoint_seq"] = seq
    return p.request("tools/call", {"name": name, "arguments": arguments, "_meta": meta})


def sent_to(tmp_path: Path) -> list[str]:
    return [e["arguments"]["to"] for e in read_effects(tmp_path / "effects.jsonl") if e["event"] == "done"]


# ---- fork ---------------------------------------------------------------------------------------------------


def test_a_divergent_call_in_fork_mode_runs_on_a_new_branch_and_the_original_is_untouched(
    journal: str, tmp_path: Path
) -> None:
    with start(journal, tmp_path) as p:
        for i in range(1, 4):
            p.call("send_email", {"to": f"v1-{i}"}, seq=i)
        p.close()
    with start(journal, tmp_path, "--on-divergence", "fork") as p:
        same = p.call("send_email", {"to": "v1-1"}, seq=1)
        forked = p.call("send_email", {"to": "v2-2"}, seq=2)
        after = p.call("send_email", {"to": "v2-next"})
        p.close()
    assert same["result"]["_meta"]["checkpoint/journal"] == {"workflow": "wf", "seq": 1, "replayed": True}
    assert forked["result"]["_meta"]["checkpoint/journal"] == {"workflow": "wf~1", "seq": 2, "replayed": False}
    # Later calls go to the branch: it inherits #1 only, so the cursor continues after the fork point.
    assert after["result"]["_meta"]["checkpoint/journal"] == {"workflow": "wf~1", "seq": 3, "replayed": False}
    assert sent_to(tmp_path) == ["v1-1", "v1-2", "v1-3", "v2-2", "v2-next"]
    j = open_j(journal)
    try:
        assert [(r.seq, r.arguments) for r in j.calls("wf")] == [
            (1, '{"to":"v1-1"}'),
            (2, '{"to":"v1-2"}'),
            (3, '{"to":"v1-3"}'),
        ]
        assert [r.seq for r in j.calls("wf~1")] == [2, 3]
        [branch] = [s for s in j.workflows() if s.workflow == "wf~1"]
        assert (branch.parent, branch.fork_seq, branch.root) == ("wf", 2, "wf")
    finally:
        j.close()


def test_a_restarted_proxy_continues_on_the_newest_branch(journal: str, tmp_path: Path) -> None:
    with start(journal, tmp_path) as p:
        p.call("send_email", {"to": "a"}, seq=1)
        p.call("send_email", {"to": "b"}, seq=2)
        p.close()
    with start(journal, tmp_path, "--on-divergence", "fork") as p:
        p.call("send_email", {"to": "B"}, seq=2)  # forks wf~1 at #2
        p.close()
    with start(journal, tmp_path) as p:  # strict mode now, same --workflow-id
        inherited = p.call("send_email", {"to": "a"}, seq=1)
        branch_replay = p.call("send_email", {"to": "B"}, seq=2)
        original = p.call("send_email", {"to": "b"}, seq=2)
        p.close()
    assert inherited["result"]["_meta"]["checkpoint/journal"] == {"workflow": "wf", "seq": 1, "replayed": True}
    assert branch_replay["result"]["_meta"]["checkpoint/journal"] == {"workflow": "wf~1", "seq": 2, "replayed": True}
    assert original["error"]["code"] == DIVERGENCE  # the branch's history is now what counts
    assert sent_to(tmp_path) == ["a", "b", "B"]


def test_ls_and_show_display_the_lineage(journal: str, tmp_path: Path) -> None:
    import subprocess

    from support import checkpoint_argv

    with start(journal, tmp_path) as p:
        p.call("send_email", {"to": "a"}, seq=1)
        p.close()
    with start(journal, tmp_path, "--on-divergence", "fork") as p:
        p.call("send_email", {"to": "z"}, seq=1)
        p.close()
    ls = subprocess.run(
        checkpoint_argv("journal", "ls", "--journal", journal),
        capture_output=True,
        text=True,
        check=True,
    )
    assert "fork of wf at #1" in ls.stdout
    show = subprocess.run(
        checkpoint_argv("journal", "show", "--journal", journal, "wf~1"),
        capture_output=True,
        text=True,
        check=True,
    )
    assert "fork of wf at #1" in show.stdout


# ---- idempotency keys ---------------------------------------------------------------------------------------


def test_a_key_names_a_call_across_restarts_whatever_its_sequence(journal: str, tmp_path: Path) -> None:
    with start(journal, tmp_path) as p:
        first = keyed(p, "send_email", {"to": "ann"}, "invoice-42")
        p.call("send_email", {"to": "other"})
        p.close()
    with start(journal, tmp_path) as p:
        p.call("send_email", {"to": "noise"})  # the cursor moves on; the key does not care
        replay = keyed(p, "send_email", {"to": "ann"}, "invoice-42")
        diverged = keyed(p, "send_email", {"to": "eve"}, "invoice-42")
        mismatch = keyed(p, "send_email", {"to": "ann"}, "invoice-42", seq=9)
        p.close()
    assert first["result"]["_meta"]["checkpoint/journal"]["seq"] == 1
    assert replay["result"]["_meta"]["checkpoint/journal"] == {"workflow": "wf", "seq": 1, "replayed": True}
    assert diverged["error"]["code"] == DIVERGENCE
    assert mismatch["error"]["code"] == INVALID_PARAMS
    assert mismatch["error"]["data"]["reason"] == "key_sequence_mismatch"
    assert sent_to(tmp_path) == ["ann", "other", "noise"]


def test_a_pending_keyed_call_is_in_doubt(journal: str, tmp_path: Path) -> None:
    with start(journal, tmp_path, trigger="after_pending_commit") as p:
        p.send(
            {
                "jsonrpc": "2.0",
                "id": 1,
                "method": "tools/call",
                "params": {"name": "send_email", "arguments": {"to": "x"}, "_meta": {"checkpoint_key": "k"}},
            }
        )
        assert p.wait() == -9
    with start(journal, tmp_path) as p:
        again = keyed(p, "send_email", {"to": "x"}, "k")
        p.close()
    assert again["error"]["code"] == IN_DOUBT
    assert done_count(tmp_path / "effects.jsonl") == 0


def test_keys_must_be_short_non_empty_strings(journal: str, tmp_path: Path) -> None:
    with start(journal, tmp_path) as p:
        replies = [keyed(p, "send_email", {"to": "x"}, bad) for bad in ["", "k" * 257]]  # type: ignore[arg-type]
        number = p.request("tools/call", {"name": "send_email", "arguments": {}, "_meta": {"checkpoint_key": 7}})
        ok = keyed(p, "send_email", {"to": "x"}, "k" * 256)
        p.close()
    for reply in [*replies, number]:
        assert reply["error"]["code"] == INVALID_PARAMS
        assert reply["error"]["data"]["reason"] == "invalid_checkpoint_key"
    assert "result" in ok


def standard_keyed(p: ProxyProcess, name: str, arguments: dict[str, Any], key: Any) -> dict[str, Any]:
    """A tools/call keyed the way MCP's request-idempotency proposal (SEP-3182) puts it: ``params.idempotencyKey``."""
    return p.request("tools/call", {"name": name, "arguments": arguments, "idempotencyKey": key})


def test_an_idempotency_key_in_params_means_what_checkpoint_key_means(journal: str, tmp_path: Path) -> None:
    with start(journal, tmp_path) as p:
        first = standard_keyed(p, "send_email", {"to": "ann"}, "order-7")
        failed = standard_keyed(p, "fail", {"reason": "no"}, "order-8")
        seen = standard_keyed(p, "echo_meta", {}, "order-9")
        p.close()
    with start(journal, tmp_path) as p:
        replay = standard_keyed(p, "send_email", {"to": "ann"}, "order-7")
        same_key_in_meta = keyed(p, "send_email", {"to": "ann"}, "order-7")
        failed_again = standard_keyed(p, "fail", {"reason": "no"}, "order-8")
        diverged = standard_keyed(p, "send_email", {"to": "eve"}, "order-7")
        conflict = p.request(
            "tools/call",
            {"name": "send_email", "arguments": {}, "idempotencyKey": "a", "_meta": {"checkpoint_key": "b"}},
        )
        bad = [standard_keyed(p, "send_email", {}, key) for key in ("", 7, "k" * 257, "\ud800")]
        p.close()
    assert first["result"]["_meta"]["checkpoint/journal"]["seq"] == 1
    assert replay["result"]["_meta"]["checkpoint/journal"] == {"workflow": "wf", "seq": 1, "replayed": True}
    assert same_key_in_meta["result"]["_meta"]["checkpoint/journal"]["replayed"] is True
    assert failed_again["error"] == failed["error"]
    assert diverged["error"]["code"] == DIVERGENCE
    assert conflict["error"]["data"]["reason"] == "conflicting_keys"
    for reply in bad:
        assert reply["error"]["code"] == INVALID_PARAMS
        assert reply["error"]["data"]["reason"] == "invalid_idempotency_key"
    assert '"idempotencyKey": "order-9"' in seen["result"]["content"][0]["text"]  # the upstream sees it too
    assert done_count(tmp_path / "effects.jsonl", "send_email") == 1
    assert done_count(tmp_path / "effects.jsonl", "fail") == 1


def test_a_call_with_an_idempotency_key_in_flight_at_a_crash_is_in_doubt(journal: str, tmp_path: Path) -> None:
    with start(journal, tmp_path, trigger="after_pending_commit") as p:
        p.send(
            {
                "jsonrpc": "2.0",
                "id": 1,
                "method": "tools/call",
                "params": {"name": "send_email", "arguments": {"to": "x"}, "idempotencyKey": "k"},
            }
        )
        assert p.wait() == -9
    with start(journal, tmp_path) as p:
        again = standard_keyed(p, "send_email", {"to": "x"}, "k")
        p.close()
    assert again["error"]["code"] == IN_DOUBT
    assert done_count(tmp_path / "effects.jsonl") == 0


# ---- replay from start ------------------------------------------------------------------------------------


def test_replay_from_start_resumes_a_20_step_script_killed_at_step_12(journal: str, tmp_path: Path) -> None:
    script = [("send_email", {"to": f"step-{i}"}) for i in range(1, 21)]
    # Run 1: the proxy dies right after step 12's PENDING row is durable, before the upstream sees it.
    with start(journal, tmp_path, "--replay-from-start", trigger="after_pending_commit@12") as p:
        for i, (name, args) in enumerate(script, 1):
            if i < 12:
                assert "result" in p.call(name, args)
            else:
                p.send(
                    {
                        "jsonrpc": "2.0",
                        "id": "twelve",
                        "method": "tools/call",
                        "params": {"name": name, "arguments": args},
                    }
                )
                break
        assert p.wait() == -9
    assert sent_to(tmp_path) == [f"step-{i}" for i in range(1, 12)]

    # Run 2: the orchestrator re-runs its script from the top, with no hints at all.
    with start(journal, tmp_path, "--replay-from-start") as p:
        replies = [p.call(name, args) for name, args in script[:12]]
        p.close()
    for i, reply in enumerate(replies[:11], 1):
        assert reply["result"]["_meta"]["checkpoint/journal"] == {"workflow": "wf", "seq": i, "replayed": True}
    assert replies[11]["error"]["code"] == IN_DOUBT
    assert len(sent_to(tmp_path)) == 11  # nothing re-ran

    # The operator checks the upstream (step 12 never arrived) and releases it; run 3 finishes the script.
    import subprocess

    from support import checkpoint_argv

    subprocess.run(
        checkpoint_argv("journal", "resolve", "--journal", journal, "wf", "12", "--release"),
        check=True,
        capture_output=True,
    )
    with start(journal, tmp_path, "--replay-from-start") as p:
        final = [p.call(name, args) for name, args in script]
        p.close()
    assert [r["result"]["_meta"]["checkpoint/journal"]["replayed"] for r in final] == [True] * 11 + [False] * 9
    assert sent_to(tmp_path) == [f"step-{i}" for i in range(1, 21)]  # every step ran exactly once
    j = open_j(journal)
    try:
        assert all(r.state is CallState.COMPLETED for r in j.calls("wf"))
    finally:
        j.close()


def test_without_replay_from_start_a_fresh_proxy_treats_the_script_as_new(journal: str, tmp_path: Path) -> None:
    with start(journal, tmp_path) as p:
        p.call("send_email", {"to": "s1"})
        p.close()
    with start(journal, tmp_path) as p:
        again = p.call("send_email", {"to": "s1"})
        p.close()
    assert again["result"]["_meta"]["checkpoint/journal"] == {"workflow": "wf", "seq": 2, "replayed": False}
    assert sent_to(tmp_path) == ["s1", "s1"]
