"""A tool's identity for repeats (`match`, `ignore`, `normalize`) and `repeat = "confirm"`, as the policy file
reads: which calls are the same call, and every mistake a usage error naming the file, the table and the key."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from checkpoint_mcp.errors import UsageError
from checkpoint_mcp.intercept.policy import DEFAULT_CONFIRM_WITHIN, Repeat, load_policy
from checkpoint_mcp.intercept.policy.report import effective_rules, render_rules
from checkpoint_mcp.signature import call_signature


def rule_of(tmp_path: Path, text: str, tool: str = "send_email") -> Any:
    path = tmp_path / "policy.toml"
    path.write_text(text, encoding="utf-8")
    return load_policy(path).rule_for(tool)


MATCH = '[tools.send_email]\nrepeat = "refuse"\nmatch = ["/to", "/subject"]\n'


def test_under_match_only_the_matched_values_make_the_identity(tmp_path: Path) -> None:
    identity = rule_of(tmp_path, MATCH).identity
    first = identity.of("send_email", {"to": "bob", "subject": "Invoice", "body": "Hi Bob"})
    reworded = identity.of("send_email", {"to": "bob", "subject": "Invoice", "body": "Hello again", "x": 1})
    other = identity.of("send_email", {"to": "eve", "subject": "Invoice", "body": "Hi Bob"})
    assert first == reworded != other
    assert identity.of("other_tool", {"to": "bob", "subject": "Invoice"}) != first  # the tool counts
    assert first != call_signature("send_email", {"to": "bob", "subject": "Invoice"})


def test_an_absent_pointer_agrees_with_absent_and_differs_from_present_and_from_null(tmp_path: Path) -> None:
    identity = rule_of(tmp_path, MATCH).identity
    lacking = identity.of("send_email", {"to": "bob"})
    assert lacking == identity.of("send_email", {"to": "bob", "body": "x"})
    assert lacking != identity.of("send_email", {"to": "bob", "subject": "Invoice"})
    assert lacking != identity.of("send_email", {"to": "bob", "subject": None})


def test_under_ignore_everything_but_the_ignored_values_counts(tmp_path: Path) -> None:
    text = '[tools.send_email]\nrepeat = "refuse"\nignore = ["/body", "/meta/sent_at", "/tags/0"]\n'
    identity = rule_of(tmp_path, text).identity
    base = {"to": "bob", "body": "a", "meta": {"sent_at": 1, "lang": "en"}, "tags": ["t1", "keep"]}
    same = {"to": "bob", "body": "b", "meta": {"sent_at": 2, "lang": "en"}, "tags": ["t2", "keep"]}
    other = {"to": "bob", "body": "a", "meta": {"sent_at": 1, "lang": "fr"}, "tags": ["t1", "keep"]}
    assert identity.of("send_email", base) == identity.of("send_email", same) != identity.of("send_email", other)
    assert identity.of("send_email", {"to": "bob"}) != identity.of("send_email", base)
    assert base["body"] == "a"
    assert "sent_at" in base["meta"]


def test_normalize_trims_collapses_white_space_and_folds_case_only_when_asked(tmp_path: Path) -> None:
    plain = rule_of(tmp_path, MATCH).identity
    text = MATCH + 'normalize = ["case", "trim", "space"]\n'
    folded = rule_of(tmp_path, text).identity
    a = {"to": "Bob@Example.com ", "subject": "Your  invoice"}
    b = {"to": " bob@example.com", "subject": "your invoice"}
    assert folded.of("send_email", a) == folded.of("send_email", b)
    assert plain.of("send_email", a) != plain.of("send_email", b)
    assert folded.normalize == ("trim", "space", "case")  # applied in one order, whatever the file's
    spaces_only = rule_of(tmp_path, MATCH + 'normalize = ["space"]\n').identity
    assert spaces_only.of("send_email", {"to": "a  b"}) == spaces_only.of("send_email", {"to": "a b"})
    assert spaces_only.of("send_email", {"to": "a b"}) != spaces_only.of("send_email", {"to": " a b"})


def test_confirm_reads_with_its_window_and_policy_check_shows_the_identity_rule(tmp_path: Path) -> None:
    text = '[tools.send_email]\nrepeat = "confirm"\nconfirm_within = "5m"\nmatch = ["/to"]\nnormalize = ["case"]\n'
    rule = rule_of(tmp_path, text)
    assert rule.repeat is Repeat.CONFIRM
    assert rule.confirm_seconds == 300
    assert rule_of(tmp_path, '[default]\nrepeat = "confirm"\n').confirm_seconds == DEFAULT_CONFIRM_WITHIN == 600
    path = tmp_path / "policy.toml"
    path.write_text(text + "[tools.read_x]\nread_only = true\n", encoding="utf-8")
    rows = effective_rules(load_policy(path), [{"name": "send_email"}, {"name": "read_x"}, {"name": "y"}], False)
    assert rows[0]["identity"] == "match /to (normalize case)"
    assert rows[0]["confirmWithinSeconds"] == 300
    assert rows[1]["identity"] is None
    assert rows[2]["identity"] is None
    shown = render_rules(rows)
    assert "repeat confirm within 24h (runs if sent again within 5m), same call by match /to (normalize case)" in shown


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        (
            '[tools.send_email]\nmatch = ["/to"]\nignore = ["/body"]\n',
            "[tools.send_email] match, ignore: give one of the two",
        ),
        ('[default]\nmatch = ["/to"]\n', "[default] match: belongs to one tool"),
        ('[default]\nignore = ["/to"]\n', "[default] ignore: belongs to one tool"),
        ('[tools.send_email]\nnormalize = ["case"]\n', "[tools.send_email] normalize: applies to the values match"),
        ('[tools.send_email]\nmatch = "/to"\n', "[tools.send_email] match: must be a list of JSON pointers"),
        ("[tools.send_email]\nmatch = []\n", "[tools.send_email] match: name at least one JSON pointer"),
        ('[tools.send_email]\nmatch = ["to"]\n', "[tools.send_email] match: 'to' is not a JSON pointer"),
        ('[tools.send_email]\nignore = [""]\n', '[tools.send_email] ignore: "" is the whole of the arguments'),
        ('[tools.send_email]\nmatch = ["/a", "/a"]\n', "[tools.send_email] match: names a pointer twice"),
        (
            '[tools.send_email]\nmatch = ["/a"]\nnormalize = ["lower"]\n',
            "[tools.send_email] normalize: unknown 'lower'",
        ),
        (
            '[tools.send_email]\njournal = false\nmatch = ["/a"]\n',
            "[tools.send_email] match: has no effect with journal = false",
        ),
        (
            '[tools.send_email]\nrepeat = "refuse"\nconfirm_within = "5m"\n',
            '[tools.send_email] confirm_within: applies to repeat = "confirm" only',
        ),
        ('[default]\nconfirm_within = "soon"\n', "[default] confirm_within: cannot read duration 'soon'"),
    ],
)
def test_every_identity_or_confirm_mistake_names_the_file_the_table_and_the_key(
    tmp_path: Path, text: str, fragment: str
) -> None:
    path = tmp_path / "policy.toml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(UsageError) as caught:
        load_policy(path)
    assert str(caught.value).startswith(str(path)), caught.value
    assert fragment in str(caught.value), caught.value
