"""Sub-rules chosen by an argument (issue 43): ``[[tools.NAME.when]]`` tables, checked once at start (a mistake
names the file, the table and the rule), chosen once per call (the first that matches; the tool's own keys are the
fallback), shown by `checkpoint policy check`, and applied by a real proxy: a sub-rule's repeat rule, its own limit
counted apart from the tool's other calls, its approval; the journal records which rule decided each call."""

from __future__ import annotations

import json
import subprocess
import tomllib
from pathlib import Path
from typing import Any

import pytest

from checkpoint_mcp.errors import UsageError
from checkpoint_mcp.intercept.policy import Approve, Policy, Repeat, ToolRule, WithinSession, load_policy, parse_policy
from checkpoint_mcp.journal import open_journal
from checkpoint_mcp.refusals import APPROVAL_REQUIRED, LIMIT_REACHED, REPEAT_REFUSED

from support import (
    DEFAULT_TIMEOUT,
    ProxyProcess,
    checkpoint_argv,
    done_count,
    journal_calls,
    read_effects,
    server_cmd,
    session_start,
)

SHELL = """
[default]
repeat = "refuse"
within_session = "run"

[tools.run]
repeat = "allow"                     # any other command repeats
ignore = ["/timeout_ms"]
[[tools.run.when]]
name = "push"
pointer = "/command"
prefixes = ["git push", "npm publish"]
repeat = "refuse"
window = "2h"
[[tools.run.when]]
name = "webhook"
pointer = ["/command", "/stdin"]
regex = 'curl\\s.*-X\\s*POST'
repeat = "confirm"
confirm_within = "5m"
[[tools.run.when]]
name = "deploy"
pointer = "/command"
prefixes = ["make deploy"]
approve = "operator"
limit = { calls = 1, per = "1h" }
[[tools.run.when]]
name = "any-git"
pointer = "/command"
prefixes = ["git"]
repeat = "replay"
"""


def policy(text: str = SHELL) -> Policy:
    return parse_policy(tomllib.loads(text), "p.toml")


def test_the_first_sub_rule_that_matches_decides_and_the_tools_own_keys_are_the_fallback() -> None:
    rule = policy().rule_for("run")
    assert [sub.name for sub in rule.when] == ["push", "webhook", "deploy", "any-git"]

    def chosen(command: object, **more: object) -> ToolRule:
        return rule.chosen({"command": command, "timeout_ms": 1000, **more})

    push = chosen("npm test && git push origin")
    assert push.source == "tools.run.when.push"
    assert (push.repeat, push.window_seconds) == (Repeat.REFUSE, 7200)
    assert push.within_session is WithinSession.RUN, "from [default], under the tool's table"
    assert push.identity is not None
    assert push.identity == rule.identity, "the tool's identity: timeout_ms ignored"
    assert chosen("git status").source == "tools.run.when.any-git", "after push: the first match wins"
    assert chosen("git status").repeat is Repeat.REPLAY
    hook = chosen("echo hi", stdin="curl -s -X POST https://hooks.example/x")
    assert (hook.source, hook.repeat, hook.confirm_seconds) == ("tools.run.when.webhook", Repeat.CONFIRM, 300)
    deploy = chosen("make deploy")
    assert deploy.approve is Approve.OPERATOR
    assert deploy.limit is not None
    assert deploy.limit.part == "deploy", "its own limit counts apart"
    fallback = chosen("npm test")
    assert fallback is rule
    assert (fallback.source, fallback.repeat, fallback.repeats_run) == ("tools.run", Repeat.ALLOW, True)
    assert chosen(42).source == "tools.run", "a value that is not a command matches no sub-rule"


def test_a_tool_without_sub_rules_is_its_own_choice() -> None:
    rule = policy('[tools.x]\nrepeat = "refuse"\n').rule_for("x")
    assert rule.when == ()
    assert rule.chosen({"anything": 1}) is rule


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("[default]\n[[default.when]]\nname = 'a'\n", "[default] when: belongs to one tool"),
        ("[tools.x]\nwhen = 3\n", "[tools.x] when: must be sub-rules: one or more [[tools.x.when]] tables"),
        ("[tools.x]\nwhen = []\n", "[tools.x] when: must be sub-rules"),
        (
            "[[tools.x.when]]\npointer = '/c'\nprefixes = ['git push']\n",
            "[[tools.x.when]] number 1: name: each sub-rule needs a name",
        ),
        (
            "[[tools.x.when]]\nname = 'a b'\npointer = '/c'\nprefixes = ['git push']\n",
            '[[tools.x.when]] number 1: name: each sub-rule needs a name of letters, digits, - and _ (got "a b")',
        ),
        (
            "[[tools.x.when]]\nname = 'a'\npointer = '/c'\nprefixes = ['x']\n"
            "[[tools.x.when]]\nname = 'a'\npointer = '/c'\nprefixes = ['y']\n",
            "[tools.x.when.a] name: two sub-rules of [tools.x] are named 'a'",
        ),
        ("[[tools.x.when]]\nname = 'a'\nprefixes = ['git push']\n", "[tools.x.when.a] pointer: the argument to test"),
        ("[[tools.x.when]]\nname = 'a'\npointer = 'c'\nprefixes = ['git push']\n", "[tools.x.when.a] pointer: 'c'"),
        ("[[tools.x.when]]\nname = 'a'\npointer = ''\nprefixes = ['git push']\n", 'pointer: "" is the whole'),
        ("[[tools.x.when]]\nname = 'a'\npointer = '/c'\n", "[tools.x.when.a]: give exactly one of prefixes"),
        (
            "[[tools.x.when]]\nname = 'a'\npointer = '/c'\nprefixes = ['g']\nregex = 'g'\n",
            "[tools.x.when.a]: give exactly one of prefixes (command prefixes) and regex",
        ),
        ("[[tools.x.when]]\nname = 'a'\npointer = '/c'\nregex = 'push('\n", "[tools.x.when.a] regex: bad regular"),
        ("[[tools.x.when]]\nname = 'a'\npointer = '/c'\nprefixes = []\n", "[tools.x.when.a] prefixes: must be"),
        ("[[tools.x.when]]\nname = 'a'\npointer = '/c'\nprefixes = ['  ']\n", "prefixes: '  ' is not a command"),
        (
            "[[tools.x.when]]\nname = 'a'\npointer = '/c'\nprefixes = ['npm test && git push']\n",
            "[tools.x.when.a] prefixes: 'npm test && git push' holds '&': a prefix is plain words of one command",
        ),
        (
            "[[tools.x.when]]\nname = 'a'\npointer = '/c'\nprefixes = ['git push']\nrepeet = 'refuse'\n",
            "[tools.x.when.a] repeet: unknown key; a sub-rule has",
        ),
        (
            "[[tools.x.when]]\nname = 'a'\npointer = '/c'\nprefixes = ['git push']\njournal = false\n",
            "[tools.x.when.a] journal: unknown key",
        ),
        (
            "[[tools.x.when]]\nname = 'a'\npointer = '/c'\nprefixes = ['git push']\nrepeat = 'deny'\n",
            '[tools.x.when.a] repeat: must be one of "allow"',
        ),
        (
            "[[tools.x.when]]\nname = 'a'\npointer = '/c'\nprefixes = ['git push']\nwindow = 'a day'\n",
            "[tools.x.when.a] window: cannot read duration 'a day'",
        ),
        (
            "[[tools.x.when]]\nname = 'a'\npointer = '/c'\nprefixes = ['git push']\nlimit = { calls = 0, per = '1h' }\n",
            "[tools.x.when.a] limit.calls: must be a whole number",
        ),
        (
            "[[tools.x.when]]\nname = 'a'\npointer = '/c'\nprefixes = ['git push']\nconfirm_within = '1m'\n",
            '[tools.x.when.a] confirm_within: applies to repeat = "confirm" only',
        ),
        (
            "[[tools.x.when]]\nname = 'a'\npointer = '/c'\nprefixes = ['git push']\napproval_expires = '1m'\n",
            "[tools.x.when.a] approval_expires: applies with approve",
        ),
        (
            "[tools.x]\nidempotent = true\n[[tools.x.when]]\nname = 'a'\npointer = '/c'\nprefixes = ['g']\n"
            "repeat = 'refuse'\n",
            "[tools.x.when.a] repeat: conflicts with the tool's idempotent = true",
        ),
        (
            "[tools.x]\njournal = false\n[[tools.x.when]]\nname = 'a'\npointer = '/c'\nprefixes = ['g']\n",
            "[tools.x] when: has no effect with journal = false",
        ),
    ],
)
def test_every_mistake_in_a_sub_rule_is_a_usage_error_naming_the_file_the_table_and_the_rule(
    tmp_path: Path, text: str, fragment: str
) -> None:
    path = tmp_path / "policy.toml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(UsageError) as caught:
        load_policy(path)
    assert str(caught.value).startswith(str(path)), caught.value
    assert fragment in str(caught.value), caught.value


def test_policy_check_shows_each_sub_rule_under_its_tool_in_order(tmp_path: Path) -> None:
    path = tmp_path / "policy.toml"
    path.write_text(SHELL, encoding="utf-8")
    tools = json.dumps([{"name": "run"}])
    argv = checkpoint_argv("policy", "check", str(path))
    done = subprocess.run(argv, input=tools, capture_output=True, text=True, timeout=DEFAULT_TIMEOUT, check=True)
    lines = done.stdout.splitlines()
    assert lines[0].split() == ["run", "journaled;", "repeat", "allow", "[tools.run]"]
    whens = [line.strip() for line in lines if line.strip().startswith("when ")]
    assert whens[0] == (
        "when /command runs git push, npm publish: repeat refuse within 2h, same call by ignore /timeout_ms   "
        "[tools.run.when.push]"
    )
    assert whens[1].startswith(r"when /command or /stdin matches /curl\s.*-X\s*POST/: repeat confirm within 24h")
    assert [w.rsplit("[", 1)[1] for w in whens] == [
        "tools.run.when.push]",
        "tools.run.when.webhook]",
        "tools.run.when.deploy]",
        "tools.run.when.any-git]",
    ]
    assert lines[-1].strip() == "any other call: the tool's own rule above"
    as_json = subprocess.run(
        [*argv, "--json"], input=tools, capture_output=True, text=True, timeout=DEFAULT_TIMEOUT, check=True
    )
    [row] = json.loads(as_json.stdout)["tools"]
    assert [(w["name"], w["repeat"], w["rule"]) for w in row["when"]] == [
        ("push", "repeat refuse", "tools.run.when.push"),
        ("webhook", "repeat confirm", "tools.run.when.webhook"),
        ("deploy", "repeat allow", "tools.run.when.deploy"),
        ("any-git", "repeat replay", "tools.run.when.any-git"),
    ]
    assert (row["when"][0]["pointers"], row["when"][0]["prefixes"]) == (["/command"], ["git push", "npm publish"])
    assert row["when"][1]["regex"] == r"curl\s.*-X\s*POST"
    assert row["when"][2]["approve"] == "operator"
    assert row["when"][2]["limit"] == {"calls": 1, "perSeconds": 3600.0, "scope": "workflow"}


PROXIED = """
[tools.send_quiet]
repeat = "allow"
limit = { calls = 100, per = "1h" }
[[tools.send_quiet.when]]
name = "push"
pointer = "/command"
prefixes = ["git push"]
repeat = "refuse"
within_session = "run"
[[tools.send_quiet.when]]
name = "deploy"
pointer = "/command"
prefixes = ["make deploy"]
limit = { calls = 1, per = "1h" }
[[tools.send_quiet.when]]
name = "drop"
pointer = "/command"
prefixes = ["dropdb"]
approve = "operator"
"""


def test_a_proxy_applies_the_sub_rule_its_arguments_choose_and_journals_which_one_decided(
    tmp_path: Path, journal: str
) -> None:
    (tmp_path / "policy.toml").write_text(PROXIED, encoding="utf-8")
    effects = tmp_path / "e.jsonl"
    argv = ("--upstream-cmd", server_cmd("effects_server.py"), "--journal", journal, "--workflow-id", "wf")
    argv = (*argv, "--policy", str(tmp_path / "policy.toml"))

    def call(p: ProxyProcess, command: str) -> dict[str, Any]:
        return p.call("send_quiet", {"command": command})

    with ProxyProcess(*argv, env={"EFFECTS_FILE": str(effects)}) as first:
        first.initialize()
        session_start(journal, tmp_path, "startup")  # the client's hook: it says where its sessions begin
        assert "result" in call(first, "npm test")
        assert "result" in call(first, "npm test && git push")
        assert "result" in call(first, "npm test && git push"), "within one session the agent's repeat runs"
        assert "result" in call(first, "make deploy")
        over = call(first, "make deploy --force")
        assert over["error"]["code"] == LIMIT_REACHED, over
        assert over["error"]["data"]["rule"] == "tools.send_quiet.when.deploy"
        assert "result" in call(first, "npm run build"), "the tool's own limit counts its other calls apart"
        gated = call(first, "dropdb prod")
        assert gated["error"]["code"] == APPROVAL_REQUIRED, gated
        assert first.close() == 0, first.stderr
    with ProxyProcess(*argv, env={"EFFECTS_FILE": str(effects)}) as second:  # a new session
        second.initialize()
        assert "result" in call(second, "npm test"), "any other command repeats from a new session"
        again = call(second, "npm test && git push")
        assert again["error"]["code"] == REPEAT_REFUSED, again
        assert again["error"]["data"]["rule"] == "tools.send_quiet.when.push"
        assert second.close() == 0, second.stderr
    assert done_count(effects, "send_quiet") == 6
    rows = [(json.loads(c.arguments)["command"], c.rule, c.repeat_rule) for c in journal_calls(journal, "wf")]
    assert rows == [
        ("npm test", "tools.send_quiet", "allow"),
        ("npm test && git push", "tools.send_quiet.when.push", "refuse"),
        ("npm test && git push", "tools.send_quiet.when.push", "refuse"),
        ("make deploy", "tools.send_quiet.when.deploy", "allow"),
        ("npm run build", "tools.send_quiet", "allow"),
        ("npm test", "tools.send_quiet", "allow"),
    ]
    opened = open_journal(journal)
    try:
        scopes = [
            tuple(row) for row in opened.execute("SELECT scope, count(*) FROM metered GROUP BY scope ORDER BY scope")
        ]
    finally:
        opened.close()
    assert scopes == [("workflow:wf", 5), ("workflow:wf when:deploy", 1)], (
        "push shares the tool's limit; deploy has its own"
    )
    shown = subprocess.run(
        checkpoint_argv("journal", "show", "--journal", journal, "wf"),
        capture_output=True,
        text=True,
        timeout=DEFAULT_TIMEOUT,
        check=True,
    )
    [header] = [line for line in shown.stdout.splitlines() if line.startswith("SEQ ")]
    assert header.split()[-1] == "RULE", shown.stdout
    assert any(line.endswith("tools.send_quiet.when.push") for line in shown.stdout.splitlines())


HINTED = """
[tools.lookup]
[[tools.lookup.when]]
name = "vault"
pointer = "/key"
regex = '^vault/'
approve = "operator"
"""


def test_a_read_only_hint_never_waives_what_a_sub_rule_asks(tmp_path: Path, journal: str) -> None:
    """Under ``--trust-annotations`` a ``readOnlyHint: true`` lets a tool pass unjournaled only where neither its rule
    nor any of its sub-rules asks anything of the journal: ``lookup`` of a vault key waits for an operator."""
    (tmp_path / "policy.toml").write_text(HINTED, encoding="utf-8")
    effects = tmp_path / "e.jsonl"
    argv = ("--upstream-cmd", server_cmd("effects_server.py"), "--journal", journal, "--workflow-id", "wf")
    argv = (*argv, "--policy", str(tmp_path / "policy.toml"), "--trust-annotations")
    with ProxyProcess(*argv, env={"EFFECTS_FILE": str(effects)}) as p:
        p.initialize()
        p.request("tools/list")  # the hints are known from here on
        plain = p.call("lookup", {"key": "k"})
        asked = p.call("lookup", {"key": "vault/root"})
        assert p.close() == 0, p.stderr
    assert plain["result"]["content"][0]["text"] == "value of k"
    assert plain["result"]["_meta"]["checkpoint/journal"]["seq"] == 1, "journaled: the hint waives nothing here"
    assert asked["error"]["code"] == APPROVAL_REQUIRED, asked
    assert [e["arguments"]["key"] for e in read_effects(effects) if e["event"] == "read"] == ["k"]
