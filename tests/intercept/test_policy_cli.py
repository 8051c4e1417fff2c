"""`--policy` at the edge, through real processes: checked before any upstream starts, and `checkpoint policy
check` printing the effective rule of every tool of a tools/list given on stdin or asked of the upstream."""

from __future__ import annotations

import json
import shlex
import subprocess
from pathlib import Path

import pytest

from support import DEFAULT_TIMEOUT, checkpoint_argv, server_cmd

POLICY = """
[default]
repeat = "refuse"
window = "24h"

[tools.send_email]
repeat = "replay"
[tools.send_email.probe]
tool = "lookup"
arguments = { key = "/to" }
happened_if = { pointer = "/count", equals = 1 }

[tools.charge_card]
idempotency = { argument = "idempotency_key" }

[tools."read_*"]
journal = false
"""


def run(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        checkpoint_argv(*args), input=stdin, capture_output=True, text=True, timeout=DEFAULT_TIMEOUT, check=False
    )


def write(tmp_path: Path, text: str, name: str = "policy.toml") -> str:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return str(path)


def test_check_prints_the_effective_rule_of_each_tool_given_on_stdin(tmp_path: Path) -> None:
    tools = {
        "tools": [
            {"name": "send_email"},
            {"name": "charge_card"},
            {"name": "read_file"},
            {"name": "lookup", "annotations": {"readOnlyHint": True}},
            {"name": "delete_repo"},
        ]
    }
    done = run(
        "policy", "check", write(tmp_path, POLICY), stdin=json.dumps({"jsonrpc": "2.0", "id": 1, "result": tools})
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].split() == ["send_email", "journaled;", "repeat", "replay", "within", "24h", "[tools.send_email]"]
    assert lines[1].split() == ["probe", "lookup(key=/to):", "happened", "if", "/count", "equals", "1"]
    assert "idempotency key in argument 'idempotency_key'" in done.stdout
    assert any(
        line.startswith("read_file") and "not journaled (journal = false); never a repeat (not journaled)" in line
        for line in lines
    )
    assert any(line.startswith("delete_repo") and "repeat refuse within 24h   [default]" in line for line in lines)
    sessions = (
        "a repeat within one session is refused; in a new session, or after a clear or a compaction, it is refused"
    )
    assert lines[lines.index(next(line for line in lines if line.startswith("delete_repo"))) + 1].strip() == sessions
    assert done.stderr == ""


def test_check_as_json_and_with_trust_annotations(tmp_path: Path) -> None:
    tools = [{"name": "lookup", "annotations": {"readOnlyHint": True}}, {"name": "send_email"}]
    done = run("policy", "check", write(tmp_path, POLICY), "--json", "--trust-annotations", stdin=json.dumps(tools))
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    lookup, send = report["tools"]
    assert lookup["journal"] is False
    assert lookup["journalReason"] == "readOnlyHint and --trust-annotations"
    assert send["probe"]["tool"] == "lookup"
    assert send["windowSeconds"] == 86400  # from [default]
    assert send["repeat"] == "repeat replay"
    assert report["warnings"] == [
        f"{report['policy']}: [tools.charge_card] names a tool the upstream does not list",
        f'{report["policy"]}: [tools."read_*"] matches no tool the upstream lists',
    ]


def test_check_with_trust_annotations_shows_a_hint_waiving_nothing_the_policy_says(tmp_path: Path) -> None:
    """A read-only hint fills in only what the policy leaves open: a tool under ``approve`` or a ``limit`` stays
    journaled and gated under ``--trust-annotations``."""
    policy = '[tools.peek]\napprove = "operator"\n[tools.scan]\nlimit = { calls = 1, per = "1h" }\n'
    hinted = {"annotations": {"readOnlyHint": True}}
    tools = [{"name": name, **hinted} for name in ("peek", "scan", "lookup")]
    done = run("policy", "check", write(tmp_path, policy), "--json", "--trust-annotations", stdin=json.dumps(tools))
    assert done.returncode == 0, done.stderr
    peek, scan, lookup = json.loads(done.stdout)["tools"]
    assert (peek["journal"], peek["approve"]) == (True, "operator")
    assert scan["journal"] is True
    assert scan["limit"] is not None
    assert lookup["journal"] is False


def test_check_asks_the_upstream_for_its_tools(tmp_path: Path) -> None:
    done = run("policy", "check", write(tmp_path, POLICY), "--upstream-cmd", server_cmd("effects_server.py"))
    assert done.returncode == 0, done.stderr
    assert any(line.startswith("lookup") for line in done.stdout.splitlines())
    assert "warning: " in done.stderr
    assert "[tools.charge_card] names a tool the upstream does not list" in done.stderr


def test_check_refuses_a_probe_whose_tool_is_not_read_only(tmp_path: Path) -> None:
    path = write(tmp_path, POLICY)
    done = run("policy", "check", path, stdin=json.dumps([{"name": "send_email"}, {"name": "lookup"}]))
    assert done.returncode == 1
    assert f"{path}: [tools.send_email.probe] tool: 'lookup' is not read-only" in done.stderr
    declared = write(tmp_path, POLICY + "[tools.lookup]\nread_only = true\n", "declared.toml")
    assert run("policy", "check", declared, stdin=json.dumps([{"name": "lookup"}])).returncode == 0


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('[default]\nrepeat = "sometimes"\n', '[default] repeat: must be one of "allow", "replay", "refuse"'),
        ('[tools."x["]\njournal = false\n', "bad glob 'x['"),
        ('[default]\nwindow = "a day"\n', "[default] window: cannot read duration 'a day'"),
        ('[tools.x.probe]\ntool = "l"\nhappened_if = { pointer = "n", equals = 1 }\n', "happened_if.pointer"),
        ("[default]\nfoo = 1\n", "[default] foo: unknown key"),
        ("[default\n", "not a valid TOML file"),
    ],
)
def test_a_bad_policy_stops_the_proxy_before_its_upstream_starts(tmp_path: Path, text: str, message: str) -> None:
    path = write(tmp_path, text)
    marker = tmp_path / "upstream-started"
    upstream = f"touch {shlex.quote(str(marker))}; cat"
    done = run("--upstream-cmd", upstream, "--journal", str(tmp_path / "j.db"), "--policy", path, stdin="")
    assert done.returncode == 2
    assert path in done.stderr
    assert message in done.stderr
    assert not marker.exists()
    assert not (tmp_path / "j.db").exists()
    checked = run("policy", "check", path, stdin="[]")
    assert checked.returncode == 1
    assert message in checked.stderr


def test_serve_refuses_a_bad_policy_before_listening(tmp_path: Path) -> None:
    path = write(tmp_path, '[tools.x]\nwindow = "0s"\n')
    done = run("serve", "--listen", "127.0.0.1:0", "--upstream-cmd", "cat", "--policy", path)
    assert done.returncode == 2
    assert "[tools.x] window: the duration must be more than zero" in done.stderr
    assert "listening" not in done.stderr


def test_a_key_in_a_header_needs_an_http_upstream(tmp_path: Path) -> None:
    path = write(tmp_path, '[tools.charge]\nidempotency = { header = "Idempotency-Key" }\n')
    done = run("--upstream-cmd", "cat", "--policy", path, stdin="")
    assert done.returncode == 2
    assert "[tools.charge] idempotency.header: a header reaches only an --upstream-url upstream" in done.stderr


def test_policy_belongs_to_the_proxy_not_to_a_journal_command(tmp_path: Path) -> None:
    done = run("--policy", write(tmp_path, ""), "journal", "ls", "--journal", str(tmp_path / "j.db"))
    assert done.returncode == 2
    assert "--policy belongs to the proxy" in done.stderr


def test_suggest_prints_the_tables_init_would_write_for_one_server(tmp_path: Path) -> None:
    done = run("policy", "suggest", "--upstream-cmd", server_cmd("effects_server.py"), "--name", "mail")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith('# Tool policy for the MCP server "mail", written by `checkpoint init` from its')
    assert "# readOnlyHint: it only reads, so it is not journaled. Arguments: none.\n[tools.lookup]\n" in done.stdout
    assert '[tools.send_email]\nrepeat = "refuse"\n' in done.stdout
    saved = tmp_path / "mail.toml"
    saved.write_text(done.stdout)
    checked = run("policy", "check", str(saved), "--upstream-cmd", server_cmd("effects_server.py"))
    assert checked.returncode == 0, checked.stderr
    assert checked.stderr == "", "every table names a tool the server lists"
    assert "lookup" in checked.stdout


def test_suggest_says_why_a_server_cannot_be_asked() -> None:
    done = run("policy", "suggest", "--upstream-cmd", "exit 3", "--upstream-timeout", "5")
    assert done.returncode == 1
    assert "Error: " in done.stderr
    assert done.stdout == ""
