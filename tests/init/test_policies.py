"""The policy text `checkpoint init` writes, read back by the proxy's own loader: every tool name, however odd, gets
the rule its hints call for; and the client variables `init` expands to ask a server, as the client would."""

from __future__ import annotations

import tomllib

import pytest

from checkpoint_mcp.cli.asktools import Unexpandable, expand
from checkpoint_mcp.init.clients import StdioEntry
from checkpoint_mcp.init.policies import Server, policy_path, suggest, suggest_command, unasked
from checkpoint_mcp.intercept.policy import Repeat, parse_policy

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
    assert policy.rule_for("no_hints").source == "tools.no_hints"
    assert policy.rule_for("wild*card").source == "default", "a name with a glob character is left to [default]"
    assert policy.rule_for("added later").repeat is Repeat.REFUSE
    assert "Arguments: a?b, c.\n" in text, "an argument name cannot end its comment early"
    assert "# no hints: taken as destructive" in text
    assert "# not read-only, not idempotent: a repeat is refused. Arguments: to.\n" in text
    assert not any(line.startswith("server") for line in text.splitlines())


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
