"""Crash safety, tested by crashing: SIGKILL the proxy at named points and check what the journal and upstream saw."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from checkpoint_mcp.journal.records import CallState
from checkpoint_mcp.refusals import IN_DOUBT

from support import ProxyProcess, done_count, effects_proxy, journal_states, read_effects, wait_until

GUARANTEE = (
    "Checkpoint guarantees that a completed side effect is never re-executed on replay, provided the replayed call "
    "sequence matches what was journaled. It does not guarantee a call that crashed mid-flight was not executed — "
    "that window is fundamentally unresolvable without upstream-specific reconciliation, and Checkpoint surfaces it "
    "rather than hiding it."
)
README = Path(__file__).parents[2] / "README.md"


def start(journal: str, tmp_path: Path, trigger: str | None = None) -> ProxyProcess:
    return effects_proxy(journal, tmp_path, trigger=trigger)


def test_guarantee_completed_side_effect_never_reexecuted(journal: str, workflow: str, tmp_path: Path) -> None:
    """The guarantee, verbatim, proven with a counted upstream, a SIGKILLed proxy and a fresh one that replays."""
    unquoted = re.sub(r"^> ?", "", README.read_text(encoding="utf-8"), flags=re.M)
    readme = re.sub(r"\s+", " ", unquoted)
    assert GUARANTEE in readme, "the README must state the guarantee verbatim"

    effects = tmp_path / "effects.jsonl"
    script = [("send_email", {"to": f"user{i}@example.com", "subject": f"invoice {i}"}) for i in range(1, 4)]
    with start(journal, tmp_path) as first:
        first.initialize()
        originals = [first.call(name, args, seq=seq)["result"] for seq, (name, args) in enumerate(script, 1)]
        # Step 4 is in flight when the machine "loses power".
        first.send(
            {
                "jsonrpc": "2.0",
                "id": "step4",
                "method": "tools/call",
                "params": {"name": "slow", "arguments": {"seconds": 30}, "_meta": {"checkpoint_seq": 4}},
            }
        )
        wait_until(lambda: any(e["tool"] == "slow" for e in read_effects(effects)), what="step 4 to start")
        first.kill()
    assert done_count(effects, "send_email") == 3
    assert journal_states(journal, workflow) == {
        1: CallState.COMPLETED,
        2: CallState.COMPLETED,
        3: CallState.COMPLETED,
        4: CallState.PENDING,
    }

    with start(journal, tmp_path) as second:
        second.initialize()
        replays = [second.call(name, args, seq=seq)["result"] for seq, (name, args) in enumerate(script, 1)]
        in_doubt = second.call("slow", {"seconds": 30}, seq=4)
        new = second.call("send_email", {"to": "new@example.com", "subject": "after"}, seq=5)
        assert second.close() == 0

    # Completed side effects were not re-executed: the upstream still saw each exactly once.
    assert done_count(effects, "send_email") == 4  # three originals + the genuinely new step 5
    for original, replay in zip(originals, replays, strict=True):
        assert replay["content"] == original["content"]
        assert replay["_meta"]["checkpoint/journal"]["replayed"] is True
    # The call that crashed mid-flight is surfaced, not hidden and not re-run.
    assert in_doubt["error"]["code"] == IN_DOUBT
    assert [e["event"] for e in read_effects(effects) if e["tool"] == "slow"] == ["started"]
    assert new["result"]["_meta"]["checkpoint/journal"] == {
        "workflow": workflow,
        "seq": 5,
        "replayed": False,
    }


# point -> (row state after the crash, times the upstream may have run the call, what a replay answers)
CRASH_POINTS = {
    "after_pending_commit": (CallState.PENDING, {0}, "in_doubt"),
    "after_forward": (CallState.PENDING, {0, 1}, "in_doubt"),
    "after_upstream_reply": (CallState.PENDING, {1}, "in_doubt"),
    "after_complete_commit": (CallState.COMPLETED, {1}, "replay"),
}


@pytest.mark.parametrize("point", CRASH_POINTS)
def test_a_proxy_killed_at_each_named_point_never_runs_the_call_twice(
    journal: str, workflow: str, tmp_path: Path, point: str
) -> None:
    effects = tmp_path / "effects.jsonl"
    expected_state, possible_runs, replay_kind = CRASH_POINTS[point]
    args = {"to": "crash@example.com", "subject": point}
    with start(journal, tmp_path, trigger=point) as doomed:
        doomed.send(
            {
                "jsonrpc": "2.0",
                "id": 1,
                "method": "tools/call",
                "params": {"name": "send_email", "arguments": args, "_meta": {"checkpoint_seq": 1}},
            }
        )
        assert doomed.wait() == -9  # it SIGKILLed itself at the point
        with pytest.raises(AssertionError, match="closed its stdout"):
            doomed.recv_line(timeout=5)  # the client never saw a reply
    assert journal_states(journal, workflow) == {1: expected_state}
    runs = done_count(effects)
    assert runs in possible_runs

    with start(journal, tmp_path) as fresh:
        reply = fresh.call("send_email", args, seq=1)
        fresh.close()
    assert done_count(effects) == runs  # the replay never reached the upstream
    if replay_kind == "replay":
        assert reply["result"]["content"][0]["text"] == "sent to crash@example.com"
        assert reply["result"]["_meta"]["checkpoint/journal"]["replayed"] is True
    else:
        assert reply["error"]["code"] == IN_DOUBT


def test_a_proxy_killed_while_the_upstream_executes_leaves_the_call_in_doubt(
    journal: str, workflow: str, tmp_path: Path
) -> None:
    effects = tmp_path / "effects.jsonl"
    with start(journal, tmp_path) as doomed:
        doomed.send(
            {
                "jsonrpc": "2.0",
                "id": 1,
                "method": "tools/call",
                "params": {"name": "slow", "arguments": {"seconds": 5}, "_meta": {"checkpoint_seq": 1}},
            }
        )
        wait_until(lambda: len(read_effects(effects)) == 1, what="the upstream to start executing")
        doomed.kill()
    assert journal_states(journal, workflow) == {1: CallState.PENDING}
    with start(journal, tmp_path) as fresh:
        reply = fresh.call("slow", {"seconds": 5}, seq=1)
        fresh.close()
    assert reply["error"]["code"] == IN_DOUBT
    assert [e["event"] for e in read_effects(effects)] == ["started"]  # died with the proxy, never re-run
