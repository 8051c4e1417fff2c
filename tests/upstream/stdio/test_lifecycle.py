"""Start-up and shutdown: client EOF, upstream death, signals, and no child ever outliving the proxy."""

from __future__ import annotations

import os
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from checkpoint_mcp.journal.records import CallState
from checkpoint_mcp.refusals import IN_DOUBT, STOPPED, UPSTREAM_EXITED

from support import ProxyProcess, checkpoint_argv, journal_states, pids_in_group, read_effects, server_cmd, wait_until


def journaled_proxy(journal: str, tmp_path: Path, upstream: str | None = None, *extra: str) -> ProxyProcess:
    return ProxyProcess(
        "--upstream-cmd",
        upstream or server_cmd("effects_server.py"),
        "--journal",
        journal,
        *extra,
        env={"EFFECTS_FILE": str(tmp_path / "effects.jsonl")},
    )


def upstream_with_pidfile(tmp_path: Path, command: str) -> tuple[str, Path]:
    """A shell command that records its process group id, then runs ``command``."""
    pidfile = tmp_path / "upstream.pid"
    return f"echo $$ > {shlex.quote(str(pidfile))}; {command}", pidfile


def test_on_client_eof_the_replies_in_flight_are_drained_and_journaled(
    journal: str, workflow: str, tmp_path: Path
) -> None:
    with journaled_proxy(journal, tmp_path) as p:
        p.send(
            {
                "jsonrpc": "2.0",
                "id": 1,
                "method": "tools/call",
                "params": {"name": "slow", "arguments": {"seconds": 0.5}},
            }
        )
        p.proc.stdin.close()  # type: ignore[union-attr]
        reply = p.response(1)
        assert p.wait() == 0
    assert reply["result"]["content"][0]["text"] == "slow  done"
    assert journal_states(journal, workflow) == {1: CallState.COMPLETED}


def test_when_the_upstream_dies_every_call_in_flight_gets_an_error_and_stays_in_doubt(
    journal: str, workflow: str, tmp_path: Path
) -> None:
    with journaled_proxy(journal, tmp_path) as p:
        p.send({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "hang", "arguments": {}}})
        p.send({"jsonrpc": "2.0", "id": 2, "method": "ping"})
        wait_until(lambda: len(read_effects(tmp_path / "effects.jsonl")) == 1, what="hang started")
        p.send({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "die", "arguments": {"code": 7}}})
        replies = {r["id"]: r for r in (p.response(1), p.response(3))}
        code = p.wait()
        stderr = p.stderr
    assert code != 0
    for ident, seq in ((1, 1), (3, 2)):
        error = replies[ident]["error"]
        assert error["code"] == UPSTREAM_EXITED
        assert error["data"]["seq"] == seq
        assert "exit code 7" in error["message"]
    assert "the upstream server exited (exit code 7)" in stderr
    assert journal_states(journal, workflow) == {1: CallState.PENDING, 2: CallState.PENDING}
    with journaled_proxy(journal, tmp_path) as p:
        again = p.call("die", {"code": 7}, seq=2)
        p.close()
    assert again["error"]["code"] == IN_DOUBT


def test_an_upstream_command_that_cannot_start_is_a_clear_error(tmp_path: Path) -> None:
    with ProxyProcess("--upstream-cmd", "no-such-mcp-server-xyz --flag") as p:
        p.send({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {}})
        reply = p.response(1)
        code = p.wait()
        stderr = p.stderr
    assert code != 0
    assert reply["error"]["code"] == UPSTREAM_EXITED
    assert "exit code 127" in stderr
    assert "not found" in stderr  # the shell's own message reaches our stderr


def test_sigterm_stops_the_proxy_and_its_whole_upstream_process_group(tmp_path: Path) -> None:
    cmd, pidfile = upstream_with_pidfile(tmp_path, f"sleep 300 & exec {server_cmd('effects_server.py')}")
    with ProxyProcess("--upstream-cmd", cmd) as p:
        p.initialize()
        pgid = int(pidfile.read_text())
        assert pids_in_group(pgid)
        p.proc.send_signal(signal.SIGTERM)
        code = p.wait()
    assert code == 128 + signal.SIGTERM
    assert not pids_in_group(pgid)  # the backgrounded `sleep` is gone too


def test_an_upstream_that_ignores_eof_and_sigterm_is_killed(tmp_path: Path) -> None:
    stubborn = f"trap '' TERM; exec {shlex.quote(sys.executable)} -c 'import time; time.sleep(300)'"
    cmd, pidfile = upstream_with_pidfile(tmp_path, stubborn)
    with ProxyProcess("--upstream-cmd", cmd) as p:
        wait_until(pidfile.exists, what="upstream start")
        wait_until(lambda: pidfile.read_text().strip() != "", what="pid written")
        pgid = int(pidfile.read_text())
        started = time.monotonic()
        code = p.close()
        elapsed = time.monotonic() - started
    assert code == 0
    assert not pids_in_group(pgid)
    assert elapsed < 15


def test_a_sigkilled_proxy_takes_its_upstream_with_it(journal: str, workflow: str, tmp_path: Path) -> None:
    with journaled_proxy(journal, tmp_path) as p:
        p.send({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "hang", "arguments": {}}})
        wait_until(lambda: len(read_effects(tmp_path / "effects.jsonl")) == 1, what="hang started")
        upstream_pid = read_effects(tmp_path / "effects.jsonl")[0]["pid"]
        p.kill()

    def gone() -> bool:
        try:
            os.kill(upstream_pid, 0)
        except ProcessLookupError:
            return True
        return Path(f"/proc/{upstream_pid}/status").read_text().find("zombie") >= 0

    wait_until(gone, what="upstream death")


def test_a_journal_that_cannot_be_opened_fails_before_the_upstream_starts(tmp_path: Path) -> None:
    marker = tmp_path / "upstream-ran"
    with ProxyProcess(
        "--upstream-cmd", f"touch {shlex.quote(str(marker))}", "--journal", str(tmp_path / "missing-dir" / "j.db")
    ) as p:
        code = p.wait()
        stderr = p.stderr
    assert code == 1
    assert "cannot open journal" in stderr
    assert "missing-dir" in stderr
    assert not marker.exists()


def test_a_file_that_is_not_a_journal_is_refused_and_left_untouched(tmp_path: Path) -> None:
    bogus = tmp_path / "j.db"
    bogus.write_bytes(b"this is not a database, just some bytes\n" * 100)
    before = bogus.read_bytes()
    marker = tmp_path / "upstream-ran"
    with ProxyProcess("--upstream-cmd", f"touch {shlex.quote(str(marker))}", "--journal", str(bogus)) as p:
        code = p.wait()
        stderr = p.stderr
    assert code == 1
    assert "is it a Checkpoint journal" in stderr
    assert bogus.read_bytes() == before
    assert not marker.exists()


def descendants(pid: int) -> set[int]:
    """Every living process below ``pid`` (zombies excluded)."""
    children: dict[int, list[int]] = {}
    alive: set[int] = set()
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            stat = (proc / "stat").read_bytes()
        except OSError:
            continue
        state, ppid = stat[stat.rfind(b")") + 2 :].split()[:2]
        children.setdefault(int(ppid), []).append(int(proc.name))
        if state not in (b"Z", b"X"):
            alive.add(int(proc.name))
    found: set[int] = set()
    frontier = [pid]
    while frontier:
        for child in children.get(frontier.pop(), []):
            found.add(child)
            frontier.append(child)
    return found & alive


def still_alive(pids: set[int]) -> set[int]:
    alive = set()
    for pid in pids:
        try:
            state = Path(f"/proc/{pid}/stat").read_bytes().rsplit(b")", 1)[1].split()[0]
        except OSError:
            continue
        if state not in (b"Z", b"X"):
            alive.add(pid)
    return alive


@pytest.mark.parametrize("shape", ["pipeline", "and-list"])
def test_a_sigkilled_proxy_takes_the_whole_tree_of_a_forking_shell_command_with_it(
    journal: str, workflow: str, tmp_path: Path, shape: str
) -> None:
    server = server_cmd("effects_server.py")
    upstream = f"cat | {server}" if shape == "pipeline" else f"cd {shlex.quote(str(tmp_path))} && {server}"
    effects = tmp_path / "effects.jsonl"
    env = {"EFFECTS_FILE": str(effects), "EFFECTS_FINISH_ON_EOF": "1"}  # a server that finishes what it started
    with ProxyProcess("--upstream-cmd", upstream, "--journal", journal, env=env) as p:
        p.send(
            {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "slow", "arguments": {"seconds": 2}}}
        )
        wait_until(lambda: len(read_effects(effects)) == 1, what="slow started")
        tree = descendants(p.proc.pid)
        server_pid = read_effects(effects)[0]["pid"]
        assert server_pid in tree
        p.kill()
    wait_until(lambda: not still_alive(tree), timeout=10, what=f"the upstream's tree to die: {still_alive(tree)}")
    time.sleep(2.5)  # past the call's end: a surviving server would have recorded it by now
    assert [e["event"] for e in read_effects(effects)] == ["started"]
    assert journal_states(journal, workflow) == {1: CallState.PENDING}  # in doubt, as the guarantee says


def test_an_upstream_that_closes_its_stdout_behind_a_waiting_shell_fails_its_call_in_flight(
    journal: str, workflow: str, tmp_path: Path
) -> None:
    upstream = f"cd {shlex.quote(str(tmp_path))} && {server_cmd('effects_server.py')}"
    with journaled_proxy(journal, tmp_path, upstream) as p:
        p.send({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "close_stdout", "arguments": {}}})
        wait_until(lambda: len(read_effects(tmp_path / "effects.jsonl")) == 1, what="close_stdout started")
        tree = descendants(p.proc.pid)
        reply = p.response(1, timeout=10)
        code = p.wait()
    assert reply["error"]["code"] == UPSTREAM_EXITED
    assert "closed its stdout" in reply["error"]["message"]
    assert code == 1
    assert not still_alive(tree)
    assert journal_states(journal, workflow) == {1: CallState.PENDING}


def test_at_client_eof_a_request_the_server_silently_dropped_is_not_waited_for(tmp_path: Path) -> None:
    with ProxyProcess("--upstream-cmd", server_cmd("effects_server.py")) as p:  # pass-through: no journal
        p.send({"jsonrpc": "2.0", "id": 1, "method": "silent/rejected", "params": {}})
        p.request("ping")  # the dropped request has reached the server
        started = time.monotonic()
        p.proc.stdin.close()  # type: ignore[union-attr]
        reply = p.response(1)
        code = p.wait()
        elapsed = time.monotonic() - started
    assert code == 0
    assert elapsed < 5  # not the 10 s drain, which only journaled calls wait for
    assert reply["error"]["code"] == STOPPED
    assert reply["error"]["data"]["why"] == "the client left"


def test_sigterm_during_the_shutdown_drain_ends_it_promptly_and_the_call_stays_in_doubt(
    journal: str, workflow: str, tmp_path: Path
) -> None:
    with journaled_proxy(journal, tmp_path) as p:
        p.send({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "hang", "arguments": {}}})
        p.send({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "send_email", "arguments": {}}})
        p.response(2)
        wait_until(lambda: len(read_effects(tmp_path / "effects.jsonl")) == 2, what="hang started")
        p.proc.stdin.close()  # type: ignore[union-attr]  # as the Python SDK's client does: EOF, then SIGTERM
        time.sleep(0.5)  # the drain is waiting for the hanging call
        started = time.monotonic()
        p.proc.send_signal(signal.SIGTERM)
        reply = p.response(1)
        code = p.wait()
        elapsed = time.monotonic() - started
    assert code == 128 + signal.SIGTERM
    assert elapsed < 2.5  # the SDK's client SIGKILLs 2 s after its SIGTERM
    assert reply["error"]["code"] == STOPPED
    assert reply["error"]["data"]["seq"] == 1
    assert journal_states(journal, workflow) == {1: CallState.PENDING, 2: CallState.COMPLETED}


def test_a_proxy_whose_stdin_is_dev_null_exits_at_once(tmp_path: Path) -> None:
    with open(os.devnull, "rb") as null:
        done = subprocess.run(
            checkpoint_argv("--upstream-cmd", server_cmd("effects_server.py")),
            stdin=null,
            capture_output=True,
            timeout=15,
            check=False,
        )
    assert done.returncode == 0, done.stderr
    assert done.stdout == b""
