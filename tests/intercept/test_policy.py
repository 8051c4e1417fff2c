"""The policy file: every key checked into frozen rules, the most specific rule winning, matchers and pointers."""

from __future__ import annotations

from pathlib import Path

import pytest

from checkpoint_mcp.errors import UsageError
from checkpoint_mcp.intercept.policy import (
    DEFAULT_WINDOW,
    Limit,
    Repeat,
    Scope,
    ToolRule,
    json_equal,
    load_policy,
)
from checkpoint_mcp.intercept.policy.pointer import MISSING, PointerError, parse_pointer, resolve
from checkpoint_mcp.intercept.policy.report import effective_rules

ISSUE_EXAMPLE = """
[default]                      # tools no rule names
repeat = "refuse"
window = "24h"

[tools.send_email]             # exact name; [tools."send_*"] for a glob
repeat = "replay"
[tools.send_email.probe]
tool = "list_outbox"                         # read-only tool of the same upstream
arguments = { to = "/to", subject = "/subject" }   # JSON pointers into the in-doubt call's arguments
happened_if = { pointer = "/count", equals = 1 }    # tested on the probe result's structuredContent
not_happened_if = { pointer = "/count", equals = 0 }

[tools.charge_card]
idempotency = { argument = "idempotency_key" }

[tools."read_*"]
journal = false
"""


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "policy.toml"
    path.write_text(text, encoding="utf-8")
    return path


def test_the_issues_example_policy_reads_into_the_rules_it_describes(tmp_path: Path) -> None:
    policy = load_policy(write(tmp_path, ISSUE_EXAMPLE))
    send = policy.rule_for("send_email")
    assert send.repeat is Repeat.REPLAY
    assert send.window_seconds == 24 * 3600  # from [default]
    assert send.probe is not None
    assert send.probe.tool == "list_outbox"
    assert dict(send.probe.arguments) == {"to": "/to", "subject": "/subject"}
    assert send.probe.happened_if is not None
    assert send.probe.happened_if.test({"count": 1})
    assert send.probe.not_happened_if is not None
    assert send.probe.not_happened_if.test({"count": 0})
    charge = policy.rule_for("charge_card")
    assert charge.idempotency is not None
    assert charge.idempotency.argument == "idempotency_key"
    assert charge.repeat is Repeat.REFUSE
    read = policy.rule_for("read_file")
    assert not read.journal
    assert not read.catches_repeats
    other = policy.rule_for("delete_repo")
    assert other.repeat is Repeat.REFUSE
    assert other.source == "default"
    assert other.catches_repeats
    assert policy.named_tools() == {"send_email", "charge_card", "list_outbox"}


def test_no_default_table_means_todays_behaviour(tmp_path: Path) -> None:
    policy = load_policy(write(tmp_path, '[tools.x]\nrepeat = "refuse"\n'))
    assert policy.rule_for("y") == ToolRule(source="default")
    assert policy.rule_for("y").window_seconds == DEFAULT_WINDOW
    assert not policy.rule_for("y").catches_repeats


def test_the_most_specific_rule_wins_exact_then_more_literals_then_fewer_wildcards_then_file_order(
    tmp_path: Path,
) -> None:
    policy = load_policy(
        write(
            tmp_path,
            """
[tools."*"]
repeat = "allow"
[tools."s*_*"]
repeat = "refuse"
[tools."send_*"]
repeat = "replay"
[tools."se*"]
window = "1h"
[tools."send_mail"]
window = "2h"
[tools."a*"]
window = "3h"
[tools."*b"]
window = "4h"
""",
        ),
    )
    assert policy.rule_for("send_mail").window_seconds == 7200  # exact
    assert policy.rule_for("send_sms").repeat is Repeat.REPLAY  # 5 literal characters beat 's*_*' and 'se*' (2)
    assert policy.rule_for("se_x").window_seconds == 3600  # 'se*' and 's*_*' have 2 literals; 'se*' 1 wildcard
    assert policy.rule_for("sx_y").repeat is Repeat.REFUSE  # 's*_*' has literals, '*' none
    assert policy.rule_for("zzz").source == 'tools."*"'
    assert policy.rule_for("ab").window_seconds == 3 * 3600  # a tie: the first written wins


def test_globs_know_question_marks_and_sets(tmp_path: Path) -> None:
    policy = load_policy(
        write(
            tmp_path,
            '[tools."get_?"]\njournal = false\n[tools."op[0-9]"]\nrepeat = "refuse"\n[tools."x[!a]"]\nrepeat = "replay"\n',
        )
    )
    assert not policy.rule_for("get_a").journal
    assert policy.rule_for("get_ab").journal
    assert policy.rule_for("op7").repeat is Repeat.REFUSE
    assert policy.rule_for("opx").repeat is Repeat.ALLOW
    assert policy.rule_for("xb").repeat is Repeat.REPLAY
    assert policy.rule_for("xa").repeat is Repeat.ALLOW


def test_an_idempotent_tool_runs_its_repeats_whatever_default_says(tmp_path: Path) -> None:
    text = (
        '[default]\nrepeat = "refuse"\nwindow = "1h"\n[tools.set]\nidempotent = true\n[tools.put]\nidempotent = false\n'
    )
    policy = load_policy(write(tmp_path, text))
    rule = policy.rule_for("set")
    assert (rule.idempotent, rule.repeat, rule.window_seconds) == (True, Repeat.ALLOW, 3600)
    assert rule.catches_repeats, "looked up, to find an in-doubt original to send again"
    put = policy.rule_for("put")
    assert (put.idempotent, put.repeat) == (False, Repeat.REFUSE)
    rows = {row["tool"]: row for row in effective_rules(policy, [{"name": "set"}, {"name": "put"}], False)}
    assert rows["set"]["idempotent"] is True
    assert rows["set"]["repeat"] == "repeat allow (idempotent: an in-doubt call is sent again as is)"
    assert rows["set"]["windowSeconds"] is None
    assert (rows["put"]["idempotent"], rows["put"]["windowSeconds"]) == (False, 3600)


@pytest.mark.parametrize(
    ("window", "seconds"),
    [
        ('"90s"', 90),
        ('"30m"', 1800),
        ('"24h"', 86400),
        ('"7d"', 604800),
        ('"2w"', 1209600),
        ('"1d12h"', 129600),
        ("45", 45),
        ("0.5", 0.5),
    ],
)
def test_windows_are_durations(tmp_path: Path, window: str, seconds: float) -> None:
    assert load_policy(write(tmp_path, f"[default]\nwindow = {window}\n")).default.window_seconds == seconds


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("[default\n", "not a valid TOML file"),
        ("version = 1\n", "unknown top-level key 'version'"),
        ("default = 3\n", "[default] must be a table"),
        ("tools = 3\n", "tools: must be tables"),
        ('[default]\nrepeet = "refuse"\n', "[default] repeet: unknown key"),
        ('[default]\nrepeat = "deny"\n', '[default] repeat: must be one of "allow", "replay", "refuse", "confirm"'),
        ("[default]\nrepeat = 1\n", "[default] repeat: must be one of"),
        ('[default]\nwindow = "24 hours"\n', "[default] window: cannot read duration '24 hours'"),
        ('[default]\nwindow = "0s"\n', "[default] window: the duration must be more than zero"),
        ("[default]\nwindow = -3\n", "[default] window: the duration must be more than zero"),
        ("[default]\nwindow = true\n", "[default] window: must be a duration"),
        ('[default]\njournal = "no"\n', "[default] journal: must be true or false (got a string)"),
        ('[default]\nidempotency = { argument = "k" }\n', "[default] idempotency: belongs to one tool"),
        ("[default]\nread_only = true\n", "[default] read_only: belongs to one tool"),
        ("[tools.x]\nread_only = 1\n", "[tools.x] read_only: must be true or false"),
        ("[default]\nidempotent = true\n", "[default] idempotent: belongs to one tool"),
        ('[tools.x]\nidempotent = "yes"\n', "[tools.x] idempotent: must be true or false (got a string)"),
        ('[tools.x]\nidempotent = true\nrepeat = "refuse"\n', "[tools.x] repeat: conflicts with idempotent = true"),
        (
            '[tools.x]\nidempotent = true\nidempotency = { argument = "k" }\n',
            "[tools.x] idempotency: conflicts with idempotent = true",
        ),
        ("[tools.x]\njournal = false\nidempotent = true\n", "[tools.x] idempotent: has no effect with journal"),
        ('[default]\nwithin_session = "allow"\n', '[default] within_session: must be one of "catch", "run"'),
        (
            '[tools.x]\nlimit = { calls = 0, per = "1h" }\n',
            "[tools.x] limit.calls: must be a whole number of calls, 1 or more (got 0)",
        ),
        ('[tools.x]\nlimit = { calls = 2.5, per = "1h" }\n', "[tools.x] limit.calls: must be a whole number"),
        ("[tools.x]\nlimit = { calls = 3 }\n", "[tools.x] limit.per: the window is required"),
        ('[tools.x]\nlimit = { calls = 3, per = "soon" }\n', "[tools.x] limit.per: cannot read duration 'soon'"),
        (
            '[tools.x]\nlimit = { calls = 1, per = "1h", scope = "fleet" }\n',
            '[tools.x] limit.scope: must be one of "workflow", "journal"',
        ),
        ('[tools.x]\nlimit = { calls = 1, per = "1h", every = 2 }\n', "[tools.x] limit.every: unknown key"),
        ("[tools.x]\nlimit = 3\n", "[tools.x] limit: must be a table such as"),
        (
            '[tools.x]\nbudget = { sum = "amount", max = 1, per = "1h" }\n',
            "[tools.x] budget.sum: must be a JSON pointer to a number",
        ),
        ('[tools.x]\nbudget = { max = 1, per = "1h" }\n', "[tools.x] budget.sum: must be a JSON pointer"),
        (
            '[tools.x]\nbudget = { sum = "/a", max = -1, per = "1h" }\n',
            "[tools.x] budget.max: must be a number, 0 or more (got -1)",
        ),
        ('[tools.x]\nbudget = { sum = "/a", max = 10 }\n', "[tools.x] budget.per: the window is required"),
        ('[default]\nbudget = { sum = "/a", max = 10, per = "1h" }\n', "[default] budget: belongs to one tool"),
        (
            '[tools.x]\njournal = false\nlimit = { calls = 1, per = "1h" }\n',
            "[tools.x] limit: has no effect with journal = false",
        ),
        (
            '[tools.x]\njournal = false\nwithin_session = "run"\n',
            "[tools.x] within_session: has no effect with journal = false",
        ),
        ('[tools."bad["]\njournal = false\n', "[tools.\"bad[\"]: bad glob 'bad['"),
        ('[tools."a]"]\njournal = false\n', "[tools.\"a]\"]: bad glob 'a]'"),
        ('[tools."x[z-a]"]\njournal = false\n', "bad glob 'x[z-a]'"),
        ('[tools.""]\njournal = false\n', "a tool name or glob must be non-empty"),
        ('[tools." x"]\njournal = false\n', "a tool name or glob must be non-empty"),
        ('[tools.x]\njournal = false\nrepeat = "refuse"\n', "[tools.x] repeat: has no effect with journal = false"),
        ("[tools.x]\nidempotency = {}\n", "[tools.x] idempotency: must be { argument"),
        ('[tools.x]\nidempotency = { argument = "a", header = "B" }\n', "[tools.x] idempotency: must be"),
        ('[tools.x]\nidempotency = { argument = "" }\n', "[tools.x] idempotency.argument: must be a non-empty"),
        (
            '[tools.x]\nidempotency = { header = "Bad Header" }\n',
            "[tools.x] idempotency.header: 'Bad Header' is not an HTTP header name",
        ),
        ("[tools.x]\nprobe = 1\n", "[tools.x.probe] must be a table"),
        (
            '[tools.x.probe]\ntool = "l"\nhappened_if = { pointer = "/n", equals = 1 }\nretries = 2\n',
            "[tools.x.probe] retries: unknown key",
        ),
        (
            '[tools.x.probe]\nhappened_if = { pointer = "/n", equals = 1 }\n',
            "[tools.x.probe] tool: must name one tool exactly",
        ),
        (
            '[tools.x.probe]\ntool = "list_*"\nhappened_if = { pointer = "/n", equals = 1 }\n',
            "[tools.x.probe] tool: must name one tool exactly",
        ),
        (
            '[tools.x.probe]\ntool = "l"\narguments = ["/a"]\nhappened_if = { pointer = "/n", equals = 1 }\n',
            "[tools.x.probe] arguments: must be a table",
        ),
        (
            '[tools.x.probe]\ntool = "l"\narguments = { to = "to" }\nhappened_if = { pointer = "/n", equals = 1 }\n',
            "[tools.x.probe] arguments.to: 'to' is not a JSON pointer",
        ),
        (
            '[tools.x.probe]\ntool = "l"\narguments = { to = "/a~2" }\nhappened_if = { pointer = "/n", equals = 1 }\n',
            "'~' must be followed by 0 or 1",
        ),
        (
            '[tools.x.probe]\ntool = "l"\narguments = { to = 3 }\nhappened_if = { pointer = "/n", equals = 1 }\n',
            "[tools.x.probe] arguments.to: must be a JSON pointer string",
        ),
        (
            '[tools.x.probe]\ntool = "l"\n',
            "[tools.x.probe] happened_if: a probe needs happened_if, not_happened_if or both",
        ),
        ('[tools.x.probe]\ntool = "l"\nhappened_if = 1\n', "[tools.x.probe] happened_if: must be a table"),
        (
            '[tools.x.probe]\ntool = "l"\nhappened_if = { equals = 1 }\n',
            "[tools.x.probe] happened_if.pointer: a JSON pointer string",
        ),
        (
            '[tools.x.probe]\ntool = "l"\nhappened_if = { pointer = "count", equals = 1 }\n',
            "[tools.x.probe] happened_if.pointer: 'count' is not a JSON pointer",
        ),
        (
            '[tools.x.probe]\ntool = "l"\nhappened_if = { pointer = "/n" }\n',
            "[tools.x.probe] happened_if: give a test beside the pointer",
        ),
        (
            '[tools.x.probe]\ntool = "l"\nhappened_if = { pointer = "/n", equal = 1 }\n',
            "[tools.x.probe] happened_if.equal: unknown key",
        ),
        (
            '[tools.x.probe]\ntool = "l"\nnot_happened_if = { pointer = "/n", exists = "yes" }\n',
            "[tools.x.probe] not_happened_if.exists: must be true or false",
        ),
        (
            '[tools.x.probe]\ntool = "l"\nhappened_if = { pointer = "/n", nonempty = 1 }\n',
            "[tools.x.probe] happened_if.nonempty: must be true or false",
        ),
        (
            '[tools.x.probe]\ntool = "l"\nhappened_if = { pointer = "/n", equals = 1979-05-27 }\n',
            "[tools.x.probe] happened_if.equals: a date has no JSON form",
        ),
        (
            '[tools.x.probe]\ntool = "l"\nhappened_if = { pointer = "/n", equals = nan }\n',
            "[tools.x.probe] happened_if.equals: nan has no JSON form",
        ),
        (
            '[tools.x.probe]\ntool = "l"\nhappened_if = { pointer = "/n", equals = 1 }\ntimeout = "soon"\n',
            "[tools.x.probe] timeout: cannot read duration 'soon'",
        ),
        (
            '[tools.x]\njournal = false\n[tools.x.probe]\ntool = "l"\nhappened_if = { pointer = "/n", equals = 1 }\n',
            "[tools.x] probe: has no effect with journal = false",
        ),
    ],
)
def test_every_mistake_is_a_usage_error_naming_the_file_the_table_and_the_key(
    tmp_path: Path, text: str, fragment: str
) -> None:
    path = write(tmp_path, text)
    with pytest.raises(UsageError) as caught:
        load_policy(path)
    assert str(caught.value).startswith(str(path)), caught.value
    assert fragment in str(caught.value), caught.value


def test_a_missing_policy_file_is_a_usage_error(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="cannot read the policy file"):
        load_policy(tmp_path / "absent.toml")


def test_a_probe_tool_must_be_read_only_by_annotation_or_by_the_policy(tmp_path: Path) -> None:
    policy = load_policy(write(tmp_path, ISSUE_EXAMPLE))
    send = {"name": "send_email"}
    charge = {"name": "charge_card"}
    with pytest.raises(UsageError, match=r"\[tools.send_email.probe\] tool: 'list_outbox' is not read-only"):
        policy.check_tools([send, charge, {"name": "list_outbox"}])
    warnings = policy.check_tools([send, charge, {"name": "list_outbox", "annotations": {"readOnlyHint": True}}])
    assert warnings == [f'{policy.path}: [tools."read_*"] matches no tool the upstream lists']
    declared = load_policy(write(tmp_path, ISSUE_EXAMPLE + "[tools.list_outbox]\nread_only = true\n"))
    assert declared.check_tools([send, {"name": "list_outbox"}, {"name": "read_x"}]) == [
        f"{declared.path}: [tools.charge_card] names a tool the upstream does not list"
    ]
    assert not declared.rule_for("list_outbox").catches_repeats


def test_matchers_test_equals_exists_contains_and_nonempty(tmp_path: Path) -> None:
    policy = load_policy(
        write(
            tmp_path,
            """
[tools.x.probe]
tool = "l"
happened_if = { pointer = "/items", contains = "a@b", nonempty = true }
not_happened_if = { pointer = "/a~1b/0/n", exists = false }
""",
        ),
    )
    probe = policy.rule_for("x").probe
    assert probe is not None
    assert probe.happened_if is not None
    assert probe.not_happened_if is not None
    assert probe.happened_if.test({"items": ["a@b", "c"]})
    assert not probe.happened_if.test({"items": []})
    assert probe.happened_if.test({"items": "to a@b."})
    assert probe.happened_if.test({"items": {"a@b": 1}})
    assert not probe.happened_if.test({"items": 3})
    assert not probe.happened_if.test(None)
    assert probe.not_happened_if.test({})
    assert not probe.not_happened_if.test({"a/b": [{"n": None}]})
    assert probe.happened_if.describe() == '/items contains "a@b" and /items nonempty true'


def test_json_equality_tells_booleans_from_numbers() -> None:
    assert json_equal(1, 1.0)
    assert not json_equal(True, 1)
    assert not json_equal(0, False)
    assert json_equal({"a": [1, "x", None]}, {"a": [1.0, "x", None]})
    assert not json_equal({"a": 1}, {"a": 1, "b": 2})
    assert not json_equal("1", 1)


def test_json_pointers_follow_rfc_6901() -> None:
    document = {"foo": ["bar", "baz"], "": 0, "a/b": 1, "m~n": 8, " ": 7}
    assert resolve(document, parse_pointer("")) == document
    assert resolve(document, parse_pointer("/foo")) == ["bar", "baz"]
    assert resolve(document, parse_pointer("/foo/0")) == "bar"
    assert resolve(document, parse_pointer("/")) == 0
    assert resolve(document, parse_pointer("/a~1b")) == 1
    assert resolve(document, parse_pointer("/m~0n")) == 8
    assert resolve(document, parse_pointer("/ ")) == 7
    assert resolve(document, parse_pointer("/foo/01")) is MISSING
    assert resolve(document, parse_pointer("/foo/-")) is MISSING
    assert resolve(document, parse_pointer("/foo/2")) is MISSING
    assert resolve(document, parse_pointer("/nope/x")) is MISSING
    for bad in ("foo", "/~", "/~2"):
        with pytest.raises(PointerError):
            parse_pointer(bad)


def test_limits_and_budgets_read_into_their_rules_and_a_default_limit_reaches_every_tool(tmp_path: Path) -> None:
    policy = load_policy(
        write(
            tmp_path,
            '[default]\nlimit = { calls = 10, per = "1h" }\n'
            '[tools.charge]\nbudget = { sum = "/amount/value", max = 100.5, per = "24h", scope = "journal" }\n',
        )
    )
    charge = policy.rule_for("charge")
    assert charge.limit == policy.rule_for("other").limit == Limit(10, 3600.0, Scope.WORKFLOW)
    assert charge.budget is not None
    assert (charge.budget.pointer, charge.budget.most, charge.budget.per_seconds) == ("/amount/value", 100.5, 86400.0)
    assert charge.budget.scope is Scope.JOURNAL
    assert policy.rule_for("other").budget is None
