"""The policy text `checkpoint init` writes, read back by the proxy's own loader: every tool name, however odd, gets
the rule its hints (or, without any, its name) call for; and the client variables `init` expands to ask a server,
as the client would."""

from __future__ import annotations

import tomllib

import pytest

from checkpoint_mcp.cli.asktools import Unexpandable, expand
from checkpoint_mcp.init.clients import StdioEntry
from checkpoint_mcp.init.policies import Server, policy_path, suggest, suggest_command, unasked
from checkpoint_mcp.intercept.policy import Repeat, WithinSession, parse_policy

from .policy_text import comments

TOOLS = [
    {"name": "read it", "annotations": {"readOnlyHint": True}, "inputSchema": {"properties": {"a\nb": {}, "c": {}}}},
    {"name": 'say "hi"\\now', "annotations": {"idempotentHint": True, "destructiveHint": True}},
    {"name": "send.mail", "annotations": {"destructiveHint": True}, "inputSchema": {"properties": {"to": {}}}},
    {"name": "no_hints"},
    {"name": "wild*card"},
]


def test_every_tool_gets_the_rule_its_hints_call_for_whatever_its_name() -> None:
    text = suggest('my "odd"\nserver', TOOLS)
    policy = parse_policy(tomllib.loads(text), "x.toml")
    assert policy.rule_for("read it").journal is False
    assert policy.rule_for('say "hi"\\now').idempotent is True
    mail = policy.rule_for("send.mail")
    assert (mail.repeat, mail.window_seconds, mail.source) == (Repeat.REFUSE, 86400, 'tools."send.mail"')
    assert mail.within_session is WithinSession.RUN, "a repeat within one unbroken session runs"
    assert policy.rule_for("no_hints").source == "tools.no_hints"
    assert policy.rule_for("no_hints").within_session is WithinSession.RUN
    assert policy.rule_for("wild*card").source == "default", "a name with a glob character is left to [default]"
    added = policy.rule_for("added later")
    assert (added.repeat, added.within_session) == (Repeat.REFUSE, WithinSession.RUN)
    assert "Arguments: a?b, c.\n" in text, "an argument name cannot end its comment early"
    assert "# no hints: taken as destructive" in text
    assert (
        "not read-only, not idempotent: the same call from a later session is refused within 24h; within one session it "
        "runs. Arguments: to."
    ) in comments(text)
    assert not any(line.startswith("server") for line in text.splitlines())
    assert all(len(line) <= 120 for line in text.splitlines() if line.startswith("#")), "comments are wrapped"


def test_a_tool_that_says_its_world_is_closed_is_journaled_and_its_repeats_run() -> None:
    tools = [
        {
            "name": "git_checkout",
            "annotations": {"readOnlyHint": False, "idempotentHint": False, "openWorldHint": False},
        },
        {"name": "move_file", "annotations": {"destructiveHint": True, "openWorldHint": False}},
        {"name": "click", "annotations": {"destructiveHint": True, "openWorldHint": True}},
    ]
    text = suggest("local", tools)
    policy = parse_policy(tomllib.loads(text), "x.toml")
    for name in ("git_checkout", "move_file"):
        rule = policy.rule_for(name)
        assert (rule.journal, rule.repeat, rule.source) == (True, Repeat.ALLOW, f"tools.{name}")
    assert "openWorldHint: false: it acts on a closed, local world the agent sees and can change back" in comments(text)
    assert policy.rule_for("click").repeat is Repeat.REFUSE, "an open world keeps the protection"


@pytest.mark.parametrize(
    ("name", "reads"),
    [
        ("get_status", True),
        ("list_items", True),
        ("search_docs", True),
        ("getIssueComments", True),
        ("kb.query", True),
        ("get_and_delete", False),
        ("create_list", False),
        ("send_search_report", False),
        ("listen", False),
    ],
)
def test_a_tool_without_hints_is_a_read_only_when_its_name_says_so(name: str, reads: bool) -> None:
    text = suggest("api", [{"name": name}])
    rule = parse_policy(tomllib.loads(text), "x.toml").rule_for(name)
    if reads:
        assert rule.journal is False
        assert "no hints; guessed from its name" in comments(text)
        assert 'Review: if it changes anything, make it repeat = "refuse"' in comments(text)
    else:
        assert (rule.journal, rule.repeat, rule.within_session) == (True, Repeat.REFUSE, WithinSession.RUN)
        assert "guessed" not in text.split("[default]")[1]


def test_a_hint_that_says_anything_stops_the_guess_from_the_name() -> None:
    text = suggest("devtools", [{"name": "take_snapshot", "annotations": {"readOnlyHint": False}}])
    rule = parse_policy(tomllib.loads(text), "x.toml").rule_for("take_snapshot")
    assert (rule.journal, rule.repeat) == (True, Repeat.REFUSE), "readOnlyHint: false is the server's word"


def test_a_server_not_asked_gets_default_alone() -> None:
    policy = parse_policy(tomllib.loads(unasked("mail", "it exited\nat once")), "x.toml")
    assert (policy.default.repeat, policy.default.window_seconds, dict(policy.exact)) == (Repeat.REFUSE, 86400, {})
    server = Server("mail", StdioEntry("npx", ("-y", "@acme/mail mcp")), {}, "/p")
    assert (
        suggest_command(server)
        == "checkpoint policy suggest --upstream-cmd 'npx -y '\"'\"'@acme/mail mcp'\"'\"'' --name mail"
    )


def test_file_names_are_safe_and_distinct() -> None:
    taken: set[str] = set()
    paths = [policy_path("/p/.checkpoint/policies", name, taken) for name in ("a/b", "a:b", "..", "A_B")]
    assert paths == [
        "/p/.checkpoint/policies/a_b.toml",
        "/p/.checkpoint/policies/a_b-2.toml",
        "/p/.checkpoint/policies/server.toml",
        "/p/.checkpoint/policies/A_B-3.toml",
    ]


@pytest.mark.parametrize(
    ("text", "expanded"),
    [
        ("${TOKEN}", "t0k"),
        ("Bearer ${env:TOKEN}!", "Bearer t0k!"),
        ("${UNSET:-fallback}", "fallback"),
        ("${workspaceFolder}/repo", "/work/space/repo"),
        ("$TOKEN stays", "$TOKEN stays"),
    ],
)
def test_client_variables_are_expanded_as_the_client_would(text: str, expanded: str) -> None:
    assert expand(text, {"TOKEN": "t0k"}, "/work/space") == expanded


@pytest.mark.parametrize(
    ("text", "message"), [("${UNSET}", "${UNSET} is not set here"), ("${input:key}", "${input:key} is known only")]
)
def test_a_variable_init_cannot_know_says_so(text: str, message: str) -> None:
    with pytest.raises(Unexpandable, match=message.replace("$", r"\$").replace("{", r"\{").replace("}", r"\}")):
        expand(text, {}, "/w")
