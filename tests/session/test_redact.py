"""Secret redaction: for every rule, what it must replace and what it must leave alone."""

from __future__ import annotations

import pytest

from checkpoint_mcp.session.redact import MARKER, RULES, Redactor, redact

R = MARKER

# (rule, text, expected): a true positive when expected differs from text, a false positive check otherwise.
CASES: list[tuple[str, str, str]] = [
    # PEM private keys: the whole block, even when the END line was cut off.
    ("pem_private_key", "-----BEGIN RSA PRIVATE KEY-----\nMIIEow\n-----END RSA PRIVATE KEY-----\nok", f"{R}\nok"),
    ("pem_private_key", "key: -----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBg", f"key: {R}"),
    ("pem_private_key", "-----BEGIN CERTIFICATE-----\nMIIC\n-----END CERTIFICATE-----", None),
    ("pem_private_key", "-----BEGIN PUBLIC KEY-----\nMIIB", None),
    # Credentials in URLs: only the password.
    ("url_credentials", "psql postgres://app:s3cret@db:5432/app", f"psql postgres://app:{R}@db:5432/app"),
    (
        "url_credentials",
        "git clone https://bot:tok3n@example.com/r.git",
        f"git clone https://bot:{R}@example.com/r.git",
    ),
    ("url_credentials", "curl https://example.com:8443/path", None),
    ("url_credentials", "ssh git@github.com:org/repo.git", None),
    # Slack webhooks.
    ("slack_webhook", "https://hooks.slack.com/services/T000/B000/XXXXXXXX", f"https://hooks.slack.com/services/{R}"),
    ("slack_webhook", "https://api.slack.com/apps", None),
    # Authorization headers and bearer tokens.
    ("authorization_header", 'curl -H "Authorization: Bearer abc.def"', f'curl -H "Authorization: Bearer {R}"'),
    ("authorization_header", "Authorization: Basic dXNlcjpwYXNz", f"Authorization: Basic {R}"),
    ("authorization_header", "the authorization flow is broken", None),
    ("bearer_token", "send Bearer 9f8e7d6c5b4a3f2e1d0c", f"send Bearer {R}"),
    ("bearer_token", "use Bearer tokens for the API", None),
    # JSON fields.
    ("json_field", '{"password": "hunter2"}', f'{{"password": "{R}"}}'),
    ("json_field", '{"apiKey": "zzz", "clientSecret": "yyy"}', f'{{"apiKey": "{R}", "clientSecret": "{R}"}}'),
    ("json_field", '{"tokens": 12, "keyboard": "us"}', None),
    # NAME=value assignments.
    ("assignment", "GITHUB_CLIENT_SECRET=gh_live_8f2a91 npm run dev", f"GITHUB_CLIENT_SECRET={R} npm run dev"),
    ("assignment", 'export OPENAI_API_KEY="abc def"', f'export OPENAI_API_KEY="{R}"'),
    ("assignment", "DB_PASSWORD=hunter2 password=x", f"DB_PASSWORD={R} password={R}"),
    ("assignment", "https://x.io/cb?access_token=abc123&state=1", f"https://x.io/cb?access_token={R}&state=1"),
    ("assignment", "MONKEY=banana SECRETARY=bob PWD=/home/me", None),
    ("assignment", "API_KEY=$API_KEY TOKEN=${TOKEN} SECRET=<your-secret>", None),
    ("assignment", "if token == expected", None),
    # Header: value (and YAML) forms need a compound name.
    ("header", "curl -H 'X-Api-Key: abc123'", f"curl -H 'X-Api-Key: {R}'"),
    ("header", "DB_PASSWORD: hunter2", f"DB_PASSWORD: {R}"),
    ("header", "accessToken: abcd1234", f"accessToken: {R}"),
    ("header", "Decided on the token: rotate it weekly", None),
    ("header", "Monkey: banana", None),
    # --password / --token / --api-key / --secret flags.
    ("secret_flag", "mysql --password=hunter2 --user root", f"mysql --password={R} --user root"),
    ("secret_flag", "gh --token abc123 --verbose", f"gh --token {R} --verbose"),
    ("secret_flag", "tool --api-key 'k 1' --client-secret xyz", f"tool --api-key '{R}' --client-secret {R}"),
    ("secret_flag", "tool --token-file /run/token --secret --verbose", None),
    ("secret_flag", "docker login --password-stdin", None),
    # JSON Web Tokens.
    (
        "jwt",
        "cookie=eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
        f"cookie={R}",
    ),
    ("jwt", "eyJhbGciOiJIUzI1NiJ9 is only a header", None),
    # Provider tokens.
    ("anthropic_key", "key sk-ant-api03-abcdefghijklmnopqrstuvwxyz", f"key {R}"),
    ("anthropic_key", "the sk-ant- prefix", None),
    ("openai_key", "key sk-proj-abcdefghijklmnopqrstuv and sk-abcdefghijklmnopqrstuvwx", f"key {R} and {R}"),
    ("openai_key", "risk-assessment-is-a-long-word-here", None),
    ("stripe_key", "sk_live_abcdefghij123 rk_test_ABCDEFGHIJ0", f"{R} {R}"),
    ("stripe_key", "pk_live_abcdefghij123", None),
    ("github_token", "ghp_abcdefghijklmnopqrstuvwxyz0123456789", R),
    ("github_token", "github_pat_11ABCDEFG0abcdefghijklmnop_qrstuv", R),
    ("github_token", "ghp_short", None),
    ("aws_access_key", "aws AKIAIOSFODNN7EXAMPLE", f"aws {R}"),
    ("aws_access_key", "AKIA is the prefix of AWS key ids", None),
    ("slack_token", "xoxb-1234567890-abcdef", R),
    ("slack_token", "xox is not a token", None),
    ("google_api_key", "maps AIzaSyA-abcdefghijklmnopqrstuvwxyz01234", f"maps {R}"),
    ("google_api_key", "AIza alone", None),
    ("npm_token", "npm_abcdefghijklmnopqrstuvwxyz0123456789", R),
    ("npm_token", "npm_config_cache=/tmp", None),
    ("pypi_token", "pypi-AgEIcHlwaS5vcmcCJGFiY2RlZmdoLWlqa2wtbW5vcC1xcnN0LXV2d3h5ejAxMjM0NQ", R),
    ("pypi_token", "pip install pypi-simple", None),
]


@pytest.mark.parametrize(("rule", "text", "expected"), CASES, ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)])
def test_each_rule_redacts_its_secrets_and_nothing_else(rule: str, text: str, expected: str | None) -> None:
    cleaned, count = redact(text)

    if expected is None:
        assert (cleaned, count) == (text, 0)
    else:
        assert cleaned == expected
        assert count == expected.count(MARKER)


def test_every_rule_has_a_true_and_a_false_positive_case() -> None:
    for rule in RULES:
        cases = [c for c in CASES if c[0] == rule.name]
        assert any(expected is not None for _, _, expected in cases), f"{rule.name} has no true positive"
        assert any(expected is None for _, _, expected in cases), f"{rule.name} has no false-positive check"


@pytest.mark.parametrize(
    "value",
    [
        "b2ef1b5919ee5d456ea146c9362a7abc92b1e556",
        "9EC893EF673DAC860E7E2B6FCAAD602983EEB0B1",
        "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
        "ee5507c0-855e-44a5-85c1-d97b767537c9",
    ],
)
def test_hash_like_values_are_never_redacted(value: str) -> None:
    for text in (
        f"GIT_TOKEN={value}",
        f"--token {value}",
        f'{{"secret": "{value}"}}',
        f"X-Request-Token: {value}",
        f"Authorization: Bearer {value}",
        f"commit {value}",
    ):
        assert redact(text) == (text, 0)


def test_redacting_twice_changes_nothing_more() -> None:
    once, count = redact("API_KEY=abc --password pw sk-ant-api03-abcdefghijklmnopqrstuvwxyz")

    assert count == 3
    assert redact(once) == (once, 0)


def test_the_redactor_counts_across_fields_and_passes_none_through() -> None:
    redactor = Redactor()

    assert redactor("TOKEN=abc") == f"TOKEN={R}"
    assert redactor.optional(None) is None
    assert redactor.optional("password=x and ghp_abcdefghijklmnopqrstuvwxyz0123456789") == f"password={R} and {R}"
    assert redactor.count == 3
