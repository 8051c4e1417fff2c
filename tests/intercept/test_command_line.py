"""Command prefixes read a shell line as the shell would run it: every command chained, substituted, or behind a
wrapper is a command; quotes, comments, redirections and here-documents are not (policy/command_line.py)."""

from __future__ import annotations

import pytest

from checkpoint_mcp.intercept.policy.argument_match import Read, parse_match
from checkpoint_mcp.intercept.policy.command_line import MAX_DEPTH, argv_commands, commands

PUSH = parse_match({"pointer": "/command", "prefixes": ["git push", "twine upload"]}, "test")


def runs_push(line: str) -> bool:
    return PUSH.test(Read({"command": line}))


@pytest.mark.parametrize(
    "line",
    [
        "git push",
        "git  push   origin main",
        "git push --tags",
        "git -C /work/repo push",
        "git -c user.name=x push origin v1.2.0",
        "/usr/bin/git push",
        "git.exe push",
        'git "push"',
        "git pu\\sh",
        "npm test && git push",
        "npm test; git push",
        "npm test || git push",
        "npm test | tee log; git push",
        "npm test & git push",
        "npm test\ngit push",
        "(cd repo && git push)",
        "{ git push; }",
        "if git push; then echo ok; fi",
        "echo $(git push)",
        "echo `git push`",
        'echo "pushed: $(git push 2>&1)"',
        "sh -c 'npm test && git push'",
        'bash -lc "cd repo; git push"',
        "env X=1 git push",
        "env -i PATH=/usr/bin git push",
        "GIT_SSH_COMMAND='ssh -i key' git push",
        "sudo git push",
        "sudo -u deploy git push",
        "sudo -E env X=1 git push",
        "nohup git push > push.log 2>&1 &",
        "timeout 60 git push",
        "timeout -s KILL 60s git push",
        "time git push",
        "xargs -n1 git push < remotes",
        "npx -y git push",
        "eval 'git push'",
        "ssh build-host 'cd app && git push'",
        "ssh -i key.pem -p 2222 build-host git push",
        "python3 -m twine upload dist/*",
        "uv run python -m twine upload dist/*",
        "py -m twine upload dist/*",
        "cat <<EOF > notes.txt\nhello\nEOF\ngit push",
    ],
)
def test_a_push_is_found_wherever_the_line_runs_it(line: str) -> None:
    assert runs_push(line)


@pytest.mark.parametrize(
    "line",
    [
        "npm test",
        "git status",
        "git log push",  # a path named push, not the push subcommand
        "git pushx",
        "echo git push",
        "echo 'git push' >> TODO.md",
        "git commit -m 'git push later'",
        'git commit -m "then git push"',
        "grep -r 'git push' docs/",
        "# git push",
        "npm test # git push later",
        "cat <<EOF > deploy.sh\ngit push\nEOF",
        "echo '$(git push)'",
        "gitpush",
        "python -m pytest",
    ],
)
def test_a_line_that_only_mentions_a_push_does_not_run_one(line: str) -> None:
    assert not runs_push(line)


def test_an_argument_vector_is_read_as_words_and_cut_at_operator_elements() -> None:
    assert PUSH.test(Read({"command": ["git", "push"]}))
    assert PUSH.test(Read({"command": ["npm", "test", "&&", "git", "push"]}))
    assert PUSH.test(Read({"command": ["sh", "-c", "npm test && git push"]}))
    assert not PUSH.test(Read({"command": ["echo", "git push"]}))
    assert not PUSH.test(Read({"command": ["git", 1]})), "not an array of strings: nothing to read"
    assert argv_commands(["a", "|", "b", "c"]) == (("a",), ("b", "c"))


def test_a_value_that_is_not_a_command_matches_nothing() -> None:
    for arguments in ({}, {"command": None}, {"command": 42}, {"command": {"line": "git push"}}):
        assert not PUSH.test(Read(arguments))


def test_the_reading_of_wrappers_keeps_both_readings_of_a_word_after_an_option() -> None:
    assert commands("sudo -u deploy git push") == (
        ("sudo", "-u", "deploy", "git", "push"),
        ("deploy", "git", "push"),
        ("git", "push"),
    )
    assert commands("FOO=1 npm test") == (("npm", "test"),)
    assert commands("echo 'a; b' # c") == (("echo", "a; b"),)


def test_a_deeply_nested_line_is_read_to_a_bounded_depth_and_a_long_one_in_one_pass() -> None:
    nested = commands("eval " * 500 + "git push")
    assert len(nested) <= 2 * MAX_DEPTH + 2, "each level of eval reads the rest once, down to MAX_DEPTH"
    wrapped = commands("sudo -a sudo -b " * 50 + "git push")
    assert len(wrapped) < 2000, "a word after an option read both ways, at most MAX_DEPTH deep"
    long = " && ".join(["npm test"] * 5000)
    assert len(commands(long)) == 5000
