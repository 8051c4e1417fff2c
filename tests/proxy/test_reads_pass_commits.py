"""A request that is not journaled never waits for a journal commit of the stdio proxy; everything else keeps its place.

The commit is held for real: another connection holds the SQLite journal's write lock (as a slow disk or a busy
database would hold it), so the proxy's commit goes to its committer thread and waits there. Meanwhile a ping or
a tools/list goes through and is answered, while the journaled call stays unsent (its PENDING row is not durable)
or its answer stays unwritten (its COMPLETED row is not durable), and a cancellation, a notification and the lines
behind them keep their order.
"""

from __future__ import annotations

import json
from pathlib import Path

from checkpoint_mcp.journal.records import CallState

from support import (
    ProxyProcess,
    done_count,
    effects_proxy,
    journal_states,
    read_effects,
    server_cmd,
    wait_until,
    write_lock,
)

PASSES_WITHIN = 3.0  # seconds; a request waiting behind the held commit would wait for SQLite's 5 s busy timeout


def line(message: dict[str, object]) -> bytes:
    return json.dumps(message).encode() + b"\n"


def call(ident: int, tool: str, arguments: dict[str, object]) -> dict[str, object]:
    return {"jsonrpc": "2.0", "id": ident, "method": "tools/call", "params": {"name": tool, "arguments": arguments}}


def ping(ident: int) -> dict[str, object]:
    return {"jsonrpc": "2.0", "id": ident, "method": "ping"}


def test_a_ping_and_a_tools_list_pass_a_held_commit_and_the_call_still_waits_for_it(tmp_path: Path) -> None:
    journal = str(tmp_path / "j.db")
    effects = tmp_path / "effects.jsonl"
    gate = tmp_path / "gate"
    with effects_proxy(journal, tmp_path) as proxy:
        proxy.initialize()
        assert "result" in proxy.call("send_email", {"to": "ann"})
        # The PENDING row of a call is held: the call is not sent, a ping and a tools/list behind it are answered.
        with write_lock(journal):
            tools_list = {"jsonrpc": "2.0", "id": 3, "method": "tools/list"}
            proxy.send_raw(line(call(1, "send_email", {"to": "bob"})) + line(ping(2)) + line(tools_list))
            assert proxy.response(2, PASSES_WITHIN) == {"jsonrpc": "2.0", "id": 2, "result": {}}
            assert "tools" in proxy.response(3, PASSES_WITHIN)["result"]
            assert done_count(effects) == 1
            assert not any(message.get("id") == 1 for message in proxy._stash)
        assert proxy.response(1)["result"]["content"][0]["text"] == "sent to bob"
        assert done_count(effects) == 2
        # The COMPLETED row of a call is held: its answer waits, a ping sent after it came back is answered.
        proxy.send(call(4, "gate", {"path": str(gate)}))
        wait_until(lambda: any(e["event"] == "started" for e in read_effects(effects)), what="the gated call")
        with write_lock(journal):
            gate.touch()
            wait_until(lambda: any(e["event"] == "answered" for e in read_effects(effects)), what="its answer")
            # The upstream wrote the call's answer before this ping's: the proxy has read it, and holds it.
            proxy.send(ping(5))
            assert proxy.response(5, PASSES_WITHIN) == {"jsonrpc": "2.0", "id": 5, "result": {}}
            assert not any(message.get("id") == 4 for message in proxy._stash)
            assert journal_states(journal, journal)[3] is CallState.PENDING
        assert proxy.response(4)["result"]["content"][0]["text"] == "gate passed"
        assert journal_states(journal, journal) == {
            1: CallState.COMPLETED,
            2: CallState.COMPLETED,
            3: CallState.COMPLETED,
        }


def recorder(tmp_path: Path, journal: str) -> ProxyProcess:
    env = {"RAW_LOG": str(tmp_path / "raw.log"), "EMIT_FILE": str(tmp_path / "emit.jsonl")}
    return ProxyProcess("--upstream-cmd", server_cmd("recorder_server.py"), "--journal", journal, env=env)


def received(tmp_path: Path) -> list[dict[str, object]]:
    """What the upstream read, in order."""
    path = tmp_path / "raw.log"
    return [json.loads(raw) for raw in path.read_bytes().splitlines()] if path.exists() else []


def test_a_cancellation_keeps_its_place_behind_its_held_call_and_nothing_passes_it(tmp_path: Path) -> None:
    journal = str(tmp_path / "j.db")
    with recorder(tmp_path, journal) as proxy:
        proxy.send(ping(0))
        wait_until(lambda: len(received(tmp_path)) == 1, what="the first ping upstream")
        cancel = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 1}}
        with write_lock(journal):
            proxy.send_raw(line(call(1, "send_email", {"to": "ann"})) + line(ping(2)) + line(cancel) + line(ping(3)))
            wait_until(lambda: len(received(tmp_path)) == 2, what="the ping that passes the held call")
            assert received(tmp_path)[1] == ping(2)
        wait_until(lambda: len(received(tmp_path)) == 5, what="the held lines")
        after = received(tmp_path)[2:]
        assert [m.get("id") for m in after] == [1, None, 3]
        assert after[1]["method"] == "notifications/cancelled"


def test_an_answer_passes_a_held_answer_but_not_a_held_notification(tmp_path: Path) -> None:
    journal = str(tmp_path / "j.db")
    emit = tmp_path / "emit.jsonl"
    with recorder(tmp_path, journal) as proxy:
        proxy.send(call(1, "send_email", {"to": "ann"}))
        wait_until(lambda: len(received(tmp_path)) == 1, what="the journaled call upstream")
        proxy.send(ping(2))
        proxy.send(ping(3))
        wait_until(lambda: len(received(tmp_path)) == 3, what="the pings upstream")
        answer = {"jsonrpc": "2.0", "id": 1, "result": {"content": [], "isError": False}}
        note = {"jsonrpc": "2.0", "method": "notifications/message", "params": {"level": "info", "data": "x"}}
        with write_lock(journal):
            # The call's answer waits for its COMPLETED row; the ping's answer behind it does not.
            emit.write_bytes(line(answer) + line({"jsonrpc": "2.0", "id": 2, "result": {}}))
            proxy.send({"jsonrpc": "2.0", "id": 10, "method": "test/emit"})
            assert proxy.recv(PASSES_WITHIN) == {"jsonrpc": "2.0", "id": 2, "result": {}}
            # A notification behind the held answer keeps its place, and the next answer does not pass it.
            emit.write_bytes(line(note) + line({"jsonrpc": "2.0", "id": 3, "result": {}}))
            proxy.send({"jsonrpc": "2.0", "id": 11, "method": "test/emit"})
            wait_until(lambda: len(received(tmp_path)) == 5, what="the second emit upstream")
        assert proxy.recv()["id"] == 1
        assert proxy.recv() == note
        assert proxy.recv() == {"jsonrpc": "2.0", "id": 3, "result": {}}
    assert journal_states(journal, journal) == {1: CallState.COMPLETED}
