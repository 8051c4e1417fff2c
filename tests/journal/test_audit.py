"""The hash chain, tampered with by hand: real journals (an SQLite file, or PostgreSQL under the flip) written by a
real proxy, edited with plain SQL behind Checkpoint's back, then `checkpoint journal verify` as a real command."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
from pathlib import Path
from typing import Any

import pytest

from checkpoint_mcp.journal import chain, is_postgres_url

from support import ProxyProcess, checkpoint_argv, server_cmd

KEY_ENV = {"CHECKPOINT_TEST_AUDIT_KEY": "s3cret-audit-key"}


def run_calls(journal: str, tmp_path: Path, *extra: str, env: dict[str, str] | None = None) -> None:
    """Five calls through a real proxy: three sent, one failed (a JSON-RPC error), one tool error."""
    with effects_proxy_with_env(journal, tmp_path, env or {}, "--workflow-id", "wf", *extra) as p:
        for to in ("a", "b", "c"):
            assert "result" in p.call("send_email", {"to": to})
        assert "error" in p.call("fail", {"reason": "no"})
        assert p.call("tool_error", {"reason": "bad"})["result"]["isError"] is True
        p.close()


def effects_proxy_with_env(journal: str, tmp_path: Path, env: dict[str, str], *extra: str) -> ProxyProcess:
    full = {"EFFECTS_FILE": str(tmp_path / "effects.jsonl"), **env}
    return ProxyProcess("--upstream-cmd", server_cmd("effects_server.py"), "--journal", journal, *extra, env=full)


def verify(journal: str, *args: str, env: dict[str, str] | None = None) -> tuple[int, dict[str, Any]]:
    done = subprocess.run(
        checkpoint_argv("journal", "verify", "--journal", journal, "--json", *args),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env={**os.environ, **(env or {})},
    )
    assert done.returncode in (0, 1), done.stderr
    return done.returncode, json.loads(done.stdout)


def first_break(report: dict[str, Any]) -> dict[str, Any]:
    [workflow] = [w for w in report["workflows"] if w["workflow"] == "wf"]
    assert workflow["breaks"], workflow
    found: dict[str, Any] = workflow["breaks"][0]
    return found


def sql(journal: str, statement: str, params: tuple[Any, ...] = ()) -> list[Any]:
    """Run one statement on the journal's database directly, as someone with write access would."""
    if is_postgres_url(journal):
        import psycopg

        with psycopg.connect(journal, autocommit=True) as con:
            cur = con.execute(statement.replace("?", "%s"), params)
            return cur.fetchall() if cur.description else []
    con = sqlite3.connect(journal)
    try:
        rows = con.execute(statement, params).fetchall()
        con.commit()
        return rows
    finally:
        con.close()


def links(journal: str) -> list[tuple[Any, ...]]:
    return sql(
        journal, "SELECT id, seq, kind, detail, at, prev_hash, hash FROM events WHERE workflow_id = 'wf' ORDER BY id"
    )


def test_a_journal_written_by_the_proxy_verifies(journal: str, tmp_path: Path) -> None:
    run_calls(journal, tmp_path)
    code, report = verify(journal)
    [wf] = [w for w in report["workflows"] if w["workflow"] == "wf"]
    assert code == 0, report
    assert (wf["ok"], wf["start"], wf["rows"]) == (True, "genesis", 5)
    kinds = [row[2] for row in links(journal)]
    assert kinds == ["reserved", "completed"] * 3 + ["reserved", "failed", "reserved", "completed"]


def test_an_edited_result_is_named_with_its_call(journal: str, tmp_path: Path) -> None:
    run_calls(journal, tmp_path)
    forged = '{"content":[{"type":"text","text":"never sent"}],"isError":false}'
    sql(journal, "UPDATE calls SET outcome = ? WHERE workflow_id = 'wf' AND seq = 2", (forged,))
    code, report = verify(journal)
    broken = first_break(report)
    assert code == 1
    assert (broken["kind"], broken["seq"]) == ("edited", 2)
    assert "outcome" in broken["message"]


def test_an_edited_link_is_named(journal: str, tmp_path: Path) -> None:
    run_calls(journal, tmp_path)
    target = links(journal)[3]  # completed of call #2
    sql(journal, "UPDATE events SET at = ? WHERE id = ?", ("2020-01-01T00:00:00.000Z", target[0]))
    code, report = verify(journal)
    broken = first_break(report)
    assert code == 1
    assert (broken["kind"], broken["link"], broken["n"], broken["seq"]) == ("edited", target[0], 4, 2)


def test_a_removed_link_is_named_with_the_gap(journal: str, tmp_path: Path) -> None:
    run_calls(journal, tmp_path)
    all_links = links(journal)
    sql(journal, "DELETE FROM events WHERE id = ?", (all_links[4][0],))  # reserved of call #3
    code, report = verify(journal)
    broken = first_break(report)
    assert code == 1
    assert (broken["kind"], broken["link"]) == ("removed", all_links[5][0])
    assert "link 5 between" in broken["message"]


def test_a_removed_call_row_is_named(journal: str, tmp_path: Path) -> None:
    run_calls(journal, tmp_path)
    sql(journal, "DELETE FROM calls WHERE workflow_id = 'wf' AND seq = 4")
    code, report = verify(journal)
    broken = first_break(report)
    assert (code, broken["kind"], broken["seq"]) == (1, "removed", 4)


def test_an_inserted_call_row_is_named(journal: str, tmp_path: Path) -> None:
    run_calls(journal, tmp_path)
    sql(
        journal,
        "INSERT INTO calls (workflow_id, seq, tool, arguments, signature, state, outcome, started_at, finished_at)"
        " VALUES ('wf', 9, 'send_email', '{}', 'x', 'COMPLETED', '{}', '2026-01-01T00:00:00.000Z', NULL)",
    )
    code, report = verify(journal)
    broken = first_break(report)
    assert (code, broken["kind"], broken["seq"]) == (1, "inserted", 9)


def store_in_order(journal: str, wanted: list[tuple[Any, ...]]) -> None:
    """Rewrite the rows of 'wf''s chain so that they hold ``wanted`` (links without their ids) in id order, as an
    editor of the database would move links around: the existing rows in place, any extra one appended."""
    ids = [row[0] for row in links(journal)]
    for row_id, (seq, kind, detail, at, prev, sealed) in zip(ids, wanted, strict=False):
        sql(
            journal,
            "UPDATE events SET seq = ?, kind = ?, detail = ?, at = ?, prev_hash = ?, hash = ? WHERE id = ?",
            (seq, kind, detail, at, prev, sealed, row_id),
        )
    for seq, kind, detail, at, prev, sealed in wanted[len(ids) :]:
        sql(
            journal,
            "INSERT INTO events (workflow_id, seq, kind, detail, at, prev_hash, hash) VALUES ('wf', ?, ?, ?, ?, ?, ?)",
            (seq, kind, detail, at, prev, sealed),
        )


def test_an_inserted_link_with_a_valid_hash_is_named(journal: str, tmp_path: Path) -> None:
    """Someone without a key can hash a link correctly; the chain still shows it was not there."""
    run_calls(journal, tmp_path)
    all_links = links(journal)
    after = all_links[1]  # insert after link 2 (completed of call #1), as link 3
    detail = {"outcome": None}
    sealed = chain.seal(
        chain.link_bytes("wf", 3, 1, "completed", chain.canonical_text(detail), after[4], after[6]), 3, None
    )
    intruder = (1, "completed", chain.canonical_text(detail), after[4], after[6], sealed)
    store_in_order(journal, [row[1:] for row in all_links[:2]] + [intruder] + [row[1:] for row in all_links[2:]])
    code, report = verify(journal)
    broken = first_break(report)
    assert code == 1
    assert (broken["kind"], broken["link"], broken["n"]) == ("inserted", all_links[2][0], 3)


def test_two_swapped_links_are_named_as_reordered(journal: str, tmp_path: Path) -> None:
    run_calls(journal, tmp_path)
    all_links = links(journal)
    wanted = [row[1:] for row in all_links]
    wanted[2], wanted[3] = wanted[3], wanted[2]
    store_in_order(journal, wanted)
    code, report = verify(journal)
    broken = first_break(report)
    assert code == 1
    assert (broken["kind"], broken["link"], broken["n"]) == ("reordered", all_links[2][0], 4)


def rebuild_without_key(journal: str) -> None:
    """Re-hash every link of 'wf' with plain SHA-256, as someone with the database but not the key can."""
    prev = ""
    for n, (link_id, seq, kind, detail, at, _, _) in enumerate(links(journal), 1):
        sealed = chain.seal(chain.link_bytes("wf", n, seq, kind, detail, at, prev), n, None)
        sql(journal, "UPDATE events SET prev_hash = ?, hash = ? WHERE id = ?", (prev, sealed, link_id))
        prev = sealed


def test_a_chain_rewritten_without_the_key_is_caught_with_it(journal: str, tmp_path: Path) -> None:
    run_calls(journal, tmp_path, "--audit-key-env", "CHECKPOINT_TEST_AUDIT_KEY", env=KEY_ENV)
    assert all(row[6].startswith("hmac-sha256:") for row in links(journal))
    assert verify(journal, "--audit-key-env", "CHECKPOINT_TEST_AUDIT_KEY", env=KEY_ENV)[0] == 0
    # A wrong key does not authenticate the links.
    code, report = verify(
        journal, "--audit-key-env", "CHECKPOINT_TEST_AUDIT_KEY", env={"CHECKPOINT_TEST_AUDIT_KEY": "x"}
    )
    assert (code, first_break(report)["kind"], first_break(report)["n"]) == (1, "edited", 1)
    # Forge a result, then rebuild the whole chain so that it verifies without a key.
    sql(journal, "UPDATE calls SET outcome = '{\"content\":[]}' WHERE workflow_id = 'wf' AND seq = 1")
    first = links(journal)[1]
    detail = {"outcome": chain.text_digest('{"content":[]}')}
    sql(journal, "UPDATE events SET detail = ? WHERE id = ?", (chain.canonical_text(detail), first[0]))
    rebuild_without_key(journal)
    assert verify(journal)[0] == 0  # without the key, a rebuilt chain cannot be told from the real one
    code, report = verify(journal, "--audit-key-env", "CHECKPOINT_TEST_AUDIT_KEY", env=KEY_ENV)
    broken = first_break(report)
    assert (code, broken["kind"]) == (1, "unauthenticated")


def test_resolutions_and_gc_never_break_the_chain_and_gc_leaves_an_anchor(journal: str, tmp_path: Path) -> None:
    from test_cli import cli, in_doubt_call

    run_calls(journal, tmp_path)
    in_doubt_call(journal, tmp_path, seq=6, to="d")
    in_doubt_call(journal, tmp_path, seq=7, to="e")
    in_doubt_call(journal, tmp_path, seq=8, to="f")
    (tmp_path / "result.json").write_text('{"content":[{"type":"text","text":"checked"}]}')
    cli(journal, "resolve", "wf", "6", "--completed", "--result-file", str(tmp_path / "result.json"))
    cli(journal, "resolve", "wf", "7", "--failed", "--message", "bounced")
    cli(journal, "resolve", "wf", "8", "--release")
    assert verify(journal)[0] == 0
    before = len(links(journal))
    cli(journal, "gc", "--older-than", "0s")
    code, report = verify(journal)
    [wf] = [w for w in report["workflows"] if w["workflow"] == "wf"]
    assert code == 0, report
    assert (wf["start"], wf["links"], wf["rows"]) == ("gc", 1, 0)
    assert before > 1
    # The chain goes on from the anchor, and a later edit is still caught.
    run_calls(journal, tmp_path)
    assert verify(journal)[0] == 0
    sql(journal, "UPDATE calls SET tool = 'other' WHERE workflow_id = 'wf' AND seq = 9")
    code, report = verify(journal)
    assert (code, first_break(report)["kind"], first_break(report)["seq"]) == (1, "edited", 9)


def test_an_export_verifies_offline_and_its_tampering_is_named(journal: str, tmp_path: Path) -> None:
    from test_cli import cli

    run_calls(journal, tmp_path)
    exported = cli(journal, "export", "wf").stdout
    path = tmp_path / "export.jsonl"
    path.write_text(exported)
    offline = subprocess.run(  # noqa: PLW1510 - the exit status is the subject
        checkpoint_argv("journal", "verify", "--export", str(path)), capture_output=True, text=True, timeout=60
    )
    assert offline.returncode == 0, offline.stdout + offline.stderr
    assert "wf: ok, 10 link(s) from its first link, 5 call row(s) checked" in offline.stdout
    lines = exported.splitlines()
    calls = [i for i, line in enumerate(lines) if json.loads(line)["type"] == "call"]
    edited = json.loads(lines[calls[0]])
    edited["outcome"]["content"][0]["text"] = "forged"
    lines_edited = [*lines]
    lines_edited[calls[0]] = json.dumps(edited)
    path.write_text("\n".join(lines_edited) + "\n")
    offline = subprocess.run(  # noqa: PLW1510 - the exit status is the subject
        checkpoint_argv("journal", "verify", "--export", str(path), "--json"),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert offline.returncode == 1
    assert first_break(json.loads(offline.stdout))["kind"] == "edited"
    kept = [i for i, line in enumerate(lines) if json.loads(line)["type"] == "link"]
    swapped = [*lines]
    swapped[kept[4]], swapped[kept[5]] = lines[kept[5]], lines[kept[4]]
    path.write_text("\n".join(swapped) + "\n")
    offline = subprocess.run(  # noqa: PLW1510 - the exit status is the subject
        checkpoint_argv("journal", "verify", "--export", str(path), "--json"),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert offline.returncode == 1
    assert first_break(json.loads(offline.stdout))["kind"] == "reordered"


def test_verify_without_a_journal_or_with_both_sources_is_a_usage_error(tmp_path: Path) -> None:
    done = subprocess.run(checkpoint_argv("journal", "verify"), capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 2
    assert "exactly one of --journal and --export" in done.stderr


@pytest.mark.parametrize("variable", ["CHECKPOINT_TEST_UNSET_KEY"])
def test_an_unset_audit_key_variable_is_refused_before_anything_starts(variable: str, tmp_path: Path) -> None:
    done = subprocess.run(  # noqa: PLW1510 - the exit status is the subject
        checkpoint_argv("--upstream-cmd", "true", "--journal", str(tmp_path / "j.db"), "--audit-key-env", variable),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert f"the environment variable {variable} is empty or unset" in done.stderr
    assert not (tmp_path / "j.db").exists()


def test_an_event_recorded_for_a_workflow_the_journal_never_saw_starts_its_chain(journal: str) -> None:
    from checkpoint_mcp.journal import open_journal

    opened = open_journal(journal)
    try:
        opened.record_event("policy-only", "repeat", None, {"reason": "same content", "big": 2**60})
        opened.record_event("policy-only", "settled", 4, {"by": "probe"})
    finally:
        opened.close()
    code, report = verify(journal, "policy-only")
    [only] = report["workflows"]
    assert (code, only["links"], only["start"]) == (0, 2, "genesis")


def test_gc_on_a_tampered_chain_does_not_launder_it(journal: str, tmp_path: Path) -> None:
    from test_cli import cli

    run_calls(journal, tmp_path)
    target = links(journal)[1]
    sql(journal, "UPDATE events SET detail = ? WHERE id = ?", ('{"outcome":null}', target[0]))
    cli(journal, "gc", "--older-than", "0s")
    code, report = verify(journal)
    assert (code, first_break(report)["kind"], first_break(report)["link"]) == (1, "edited", target[0])
