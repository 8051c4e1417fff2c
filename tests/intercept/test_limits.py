"""Limits and budgets (`limit`, `budget` in a tool policy) through real proxies, on SQLite and PostgreSQL: what
runs, what is refused and what its refusal says, counted across fresh proxies and over a whole journal, and two
proxies racing for the last call a limit allows."""

from __future__ import annotations

import subprocess
import threading
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from checkpoint_mcp.journal import default_workflow_id
from checkpoint_mcp.refusals import APPROVAL_REQUIRED, LIMIT_REACHED

from support import (
    ProxyProcess,
    approval_requests,
    checkpoint_argv,
    decide_request,
    done_count,
    journal_calls,
    server_cmd,
)


@pytest.fixture(params=["sqlite", "postgres"])
def location(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "postgres":
        return str(request.getfixturevalue("pg_url"))
    return str(tmp_path / "j.db")


def write_policy(tmp_path: Path, text: str) -> str:
    path = tmp_path / "policy.toml"
    path.write_text(text, encoding="utf-8")
    return str(path)


def proxy(location: str, tmp_path: Path, policy: str, *extra: str) -> ProxyProcess:
    return ProxyProcess(
        "--upstream-cmd",
        server_cmd("effects_server.py"),
        "--journal",
        location,
        "--policy",
        policy,
        *extra,
        env={"EFFECTS_FILE": str(tmp_path / "effects.jsonl")},
    )


def calls(location: str, tmp_path: Path, policy: str, sent: list[tuple[str, dict[str, Any]]], *extra: str) -> list[Any]:
    """The answers to ``sent``, one after another, from one new proxy process."""
    with proxy(location, tmp_path, policy, *extra) as p:
        p.initialize()
        answers = [p.call(tool, arguments) for tool, arguments in sent]
        assert p.close() == 0, p.stderr
    return answers


def mail(n: int) -> tuple[str, dict[str, Any]]:
    return "send_email", {"to": f"user{n}@example.com", "subject": f"Invoice {n}"}


def test_a_limit_runs_that_many_calls_per_window_and_refuses_the_next_saying_when_it_may_run(
    location: str, tmp_path: Path
) -> None:
    policy = write_policy(tmp_path, '[tools.send_email]\nlimit = { calls = 2, per = "1h" }\n')
    before = datetime.now(UTC)
    first, second, third = calls(location, tmp_path, policy, [mail(1), mail(2), mail(3)])
    (fourth,) = calls(location, tmp_path, policy, [mail(4)])  # a fresh proxy counts what the journal holds
    assert "result" in first
    assert "result" in second
    for refused in (third, fourth):
        error = refused["error"]
        assert error["code"] == LIMIT_REACHED
        assert error["data"]["reason"] == "limit"
        assert error["data"]["counted"] == 2
        after = datetime.fromisoformat(error["data"]["runsAgainAfter"].replace("Z", "+00:00"))
        assert before + timedelta(hours=1) <= after <= datetime.now(UTC) + timedelta(hours=1)
        message = error["message"]
        assert message.startswith("limit reached, not run: the tool policy [tools.send_email] lets send_email run")
        assert "at most 2 times per 1h in this workflow, and 2 ran in the last 1h" in message
        assert f"The next call may run after {error['data']['runsAgainAfter']}" in message
    assert done_count(tmp_path / "effects.jsonl", "send_email") == 2
    assert len(journal_calls(location, default_workflow_id(location))) == 2  # a refused call takes no sequence
    shown = subprocess.run(
        checkpoint_argv("journal", "show", "--journal", location, default_workflow_id(location)),
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert shown.stdout.count("limit of send_email at ") == 2, shown.stdout
    assert f"refused ({LIMIT_REACHED}), 2 ran, at most 2 per 1h" in shown.stdout


def test_the_window_rolls_and_a_call_runs_again_once_the_oldest_counted_one_left_it(
    location: str, tmp_path: Path
) -> None:
    """``per`` is a rolling window: the call refused now runs after ``runsAgainAfter``, when the oldest call counted
    has left the window; a budget's room comes back the same way."""
    policy = write_policy(
        tmp_path,
        '[tools.send_email]\nlimit = { calls = 1, per = "2s" }\n'
        '[tools.send_quiet]\nbudget = { sum = "/amount", max = 10, per = "2s" }\n',
    )
    quiet = ("send_quiet", {"amount": 10, "card": "c1"})
    with proxy(location, tmp_path, policy) as p:
        p.initialize()
        assert "result" in p.call(*mail(1))
        assert "result" in p.call(*quiet)
        refused = p.call(*mail(2))
        over = p.call("send_quiet", {"amount": 1, "card": "c2"})
        assert refused["error"]["code"] == LIMIT_REACHED
        assert over["error"]["code"] == LIMIT_REACHED
        after = datetime.fromisoformat(refused["error"]["data"]["runsAgainAfter"].replace("Z", "+00:00"))
        wait = (after - datetime.now(UTC)).total_seconds()
        assert 0 < wait <= 2
        time.sleep(wait + 0.1)
        assert "result" in p.call(*mail(2))
        assert "result" in p.call("send_quiet", {"amount": 1, "card": "c2"})
        assert p.close() == 0, p.stderr
    assert done_count(tmp_path / "effects.jsonl", "send_email") == 2
    assert done_count(tmp_path / "effects.jsonl", "send_quiet") == 2


def test_a_replayed_call_and_a_caught_repeat_are_not_counted(location: str, tmp_path: Path) -> None:
    """The repeat check comes before the limit: a repeat answered from the journal did not run, so it takes
    nothing from the limit; the first new call after it does."""
    policy = write_policy(tmp_path, '[tools.send_email]\nrepeat = "replay"\nlimit = { calls = 1, per = "1h" }\n')
    first, replayed, other = calls(location, tmp_path, policy, [mail(1), mail(1), mail(2)])
    assert "result" in first
    assert replayed["result"]["_meta"]["checkpoint/journal"]["repeatOf"]["seq"] == 1
    assert other["error"]["code"] == LIMIT_REACHED
    assert done_count(tmp_path / "effects.jsonl", "send_email") == 1


def test_a_limit_over_the_journal_counts_the_calls_of_every_workflow(location: str, tmp_path: Path) -> None:
    policy = write_policy(tmp_path, '[tools.send_email]\nlimit = { calls = 2, per = "1h", scope = "journal" }\n')
    (a,) = calls(location, tmp_path, policy, [mail(1)], "--workflow-id", "alpha")
    (b,) = calls(location, tmp_path, policy, [mail(2)], "--workflow-id", "beta")
    (c,) = calls(location, tmp_path, policy, [mail(3)], "--workflow-id", "gamma")
    assert "result" in a
    assert "result" in b
    assert c["error"]["code"] == LIMIT_REACHED
    assert "across every workflow of the journal" in c["error"]["message"]
    assert done_count(tmp_path / "effects.jsonl", "send_email") == 2


def race(barrier: threading.Barrier, p: ProxyProcess, n: int, answers: list[Any]) -> None:
    barrier.wait(timeout=30)
    answers.append(p.call(*mail(n)))


def test_two_proxies_racing_for_the_last_call_of_a_limit_run_it_once(location: str, tmp_path: Path) -> None:
    """Two proxies (two workflows, one journal) send at the same moment when the limit has room for one: the count
    and the reservation are one transaction, so exactly one runs, whichever it is, ten times over."""
    for round_ in range(10):
        tool = f"r{round_}"
        text = f'[tools.send_email]\nlimit = {{ calls = {round_ + 1}, per = "1h", scope = "journal" }}\n'
        policy = write_policy(tmp_path, text)
        answers: list[Any] = []
        with (
            proxy(location, tmp_path, policy, "--workflow-id", f"a-{tool}") as a,
            proxy(location, tmp_path, policy, "--workflow-id", f"b-{tool}") as b,
        ):
            a.initialize()
            b.initialize()
            barrier = threading.Barrier(2)
            threads = [
                threading.Thread(target=race, args=(barrier, p, 100 * round_ + i, answers))
                for i, p in enumerate((a, b))
            ]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join(timeout=60)
            assert a.close() == 0, a.stderr
            assert b.close() == 0, b.stderr
        assert sorted("result" in answer for answer in answers) == [False, True], answers
        assert done_count(tmp_path / "effects.jsonl", "send_email") == round_ + 1


def test_a_budget_adds_up_the_amounts_of_the_calls_that_ran(location: str, tmp_path: Path) -> None:
    policy = write_policy(tmp_path, '[tools.send_quiet]\nbudget = { sum = "/amount", max = 100, per = "24h" }\n')
    sent = [("send_quiet", {"amount": amount}) for amount in (40, 50, 20, 10)]
    sent += [("send_quiet", {"amount": "ten"}), ("send_quiet", {"to": "nobody"}), ("send_quiet", {"amount": 1})]
    forty, fifty, twenty, ten, words, missing, one = calls(location, tmp_path, policy, sent)
    assert all("result" in answer for answer in (forty, fifty, ten))
    error = twenty["error"]
    assert error["code"] == LIMIT_REACHED
    assert error["data"]["reason"] == "budget"
    assert (error["data"]["spent"], error["data"]["amount"]) == (90, 20)
    assert "90 ran in the last 24h, and this call asks for 20" in error["message"]
    assert "A call of at most 10 may run now." in error["message"]
    for unreadable, got in ((words, '"ten"'), (missing, "nothing")):
        assert unreadable["error"]["code"] == LIMIT_REACHED
        assert unreadable["error"]["data"]["reason"] == "budget_amount"
        assert f"this call has {got} there. An amount is a number, 0 or more" in unreadable["error"]["message"]
    assert one["error"]["data"]["reason"] == "budget"  # 100 spent: nothing more fits
    assert done_count(tmp_path / "effects.jsonl", "send_quiet") == 3


def test_a_call_over_its_limit_asks_for_no_approval(location: str, tmp_path: Path) -> None:
    """The limit check comes before the approval check: a call the limit refuses makes no approval request."""
    policy = write_policy(tmp_path, '[tools.send_email]\napprove = "operator"\nlimit = { calls = 1, per = "1h" }\n')
    (asked,) = calls(location, tmp_path, policy, [mail(1)])
    assert asked["error"]["code"] == APPROVAL_REQUIRED
    decide_request(location, asked["error"]["data"]["approval"])
    ran, over = calls(location, tmp_path, policy, [mail(1), mail(2)])
    assert "result" in ran
    assert over["error"]["code"] == LIMIT_REACHED
    assert len(approval_requests(location)) == 1
    assert done_count(tmp_path / "effects.jsonl", "send_email") == 1
