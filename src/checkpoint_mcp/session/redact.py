"""Secret scrubbing for every free-text field, before anything touches disk.

Each rule finds one kind of secret and replaces only the secret part with ``«redacted»``, keeping the name,
flag or header around it so the text still reads. A value that looks like a hash (40 or 64 hex digits, or a
UUID) is never redacted: commit ids and blob hashes are what drift detection runs on. Redaction is a safety
net, not a guarantee; the checkpoint should still stay out of version control.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

MARKER: Final = "«redacted»"

_HASH_LIKE = re.compile(
    r"[0-9a-fA-F]{40}|[0-9a-fA-F]{64}|[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}"
)
# A secret-bearing name: something ending in TOKEN, SECRET, PASSWORD or PASSWD, or in KEY after a separator
# (`API_KEY`, `x-api-key`), or a camelCase `apiKey`. `PWD` is left alone: it is the working directory.
_SENSITIVE_NAME = (
    r"(?:[A-Za-z0-9_.-]*(?:token|secret|password|passwd|passphrase|api_?key|apikey|access_?key|private_?key)"
    r"|[A-Za-z0-9_.-]*[A-Za-z0-9][_.-]key)"
)
# The same with a required prefix, for the `Name: value` form, so prose ("the token: ...") is left alone.
_COMPOUND_NAME = r"(?:[A-Za-z0-9][A-Za-z0-9_.-]*?(?:[_.-]|(?<=[a-z0-9])(?-i:(?=[A-Z])))(?:token|secret|password|key))"
_UNQUOTED_VALUE = r"[^\s'\"`,;&|)}\]<>]+"


@dataclass(frozen=True)
class Rule:
    """One kind of secret: a pattern whose group ``secret`` is replaced."""

    name: str
    pattern: re.Pattern[str]


def _rule(name: str, pattern: str, flags: int = 0) -> Rule:
    return Rule(name, re.compile(pattern, flags))


RULES: Final[tuple[Rule, ...]] = (
    # Whole blocks first, so that no later rule rewrites a fragment of one.
    _rule(
        "pem_private_key",
        r"(?P<secret>-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY-----"
        r"(?:.*?-----END (?:[A-Z0-9]+ )*PRIVATE KEY-----|.*\Z))",
        re.DOTALL,
    ),
    _rule("url_credentials", r"\b[a-zA-Z][a-zA-Z0-9+.-]*://[^\s/:@]+:(?P<secret>[^\s/@]+)@"),
    _rule("slack_webhook", r"https://hooks\.slack\.com/(?:services|workflows)/(?P<secret>[A-Za-z0-9_/-]+)"),
    _rule(
        "authorization_header",
        r"\bAuthorization\s*[:=]\s*(?:(?:Bearer|Basic|Token|Digest)\s+)?(?P<secret>[A-Za-z0-9._~+/=-]+)",
        re.IGNORECASE,
    ),
    # A bare bearer token needs a digit and some length, so that prose ("use Bearer tokens") is left alone.
    _rule("bearer_token", r"\bBearer\s+(?P<secret>(?=[A-Za-z._~+/=-]*[0-9])[A-Za-z0-9._~+/=-]{16,})"),
    _rule(
        "json_field",
        rf"""(?P<q>["']){_SENSITIVE_NAME}(?P=q)\s*:\s*(?P<v>["'])(?P<secret>(?:(?!(?P=v))[^\\]|\\.)+)(?P=v)""",
        re.IGNORECASE,
    ),
    _rule(
        "assignment",
        rf"""(?<![A-Za-z0-9_.-]){_SENSITIVE_NAME}\s*=(?!=)\s*"""
        rf"""(?:(?P<v>["'])(?P<qsecret>[^"'\n]+)(?P=v)|(?P<secret>{_UNQUOTED_VALUE}))""",
        re.IGNORECASE,
    ),
    _rule(
        "header",
        rf"""(?<![A-Za-z0-9_.-]){_COMPOUND_NAME}:[ \t]*"""
        rf"""(?:(?P<v>["'])(?P<qsecret>[^"'\n]+)(?P=v)|(?P<secret>{_UNQUOTED_VALUE}))""",
        re.IGNORECASE,
    ),
    _rule(
        "secret_flag",
        r"""--(?:[A-Za-z0-9]+-)*(?:password|passwd|token|api-?key|secret)(?:=|\s+)"""
        rf"""(?:(?P<v>["'])(?P<qsecret>[^"'\n]+)(?P=v)|(?!-)(?P<secret>{_UNQUOTED_VALUE}))""",
        re.IGNORECASE,
    ),
    _rule("jwt", r"\b(?P<secret>eyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,})"),
    _rule("anthropic_key", r"\b(?P<secret>sk-ant-[A-Za-z0-9_-]{20,})"),
    _rule("openai_key", r"\b(?P<secret>sk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_-]{20,})"),
    _rule("stripe_key", r"\b(?P<secret>(?:sk|rk)_(?:live|test)_[A-Za-z0-9]{10,})"),
    _rule("github_token", r"\b(?P<secret>(?:gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,}))"),
    _rule("aws_access_key", r"\b(?P<secret>(?:AKIA|ASIA)[0-9A-Z]{16})\b"),
    _rule("slack_token", r"\b(?P<secret>xox[abposr]-[A-Za-z0-9-]{10,})"),
    _rule("google_api_key", r"\b(?P<secret>AIza[0-9A-Za-z_-]{35,})"),
    _rule("npm_token", r"\b(?P<secret>npm_[A-Za-z0-9]{36})\b"),
    _rule("pypi_token", r"\b(?P<secret>pypi-[A-Za-z0-9_-]{50,})"),
)
"""Applied in order; earlier rules replace a secret before a later, more generic one could see part of it."""


def _keeps(secret: str) -> bool:
    """Values that are never redacted: hashes and UUIDs, variable references, and what is already redacted."""
    return (
        bool(_HASH_LIKE.fullmatch(secret))
        or MARKER in secret
        or secret.startswith("$")  # a variable or command reference, not the secret itself
        or bool(re.fullmatch(r"<[^<>]*>|\*+", secret))  # a placeholder or an already-masked value
    )


def redact(text: str) -> tuple[str, int]:
    """The text with every secret-looking value replaced by ``«redacted»``, and how many were replaced."""
    total = 0
    for rule in RULES:
        text, count = _apply(rule, text)
        total += count
    return text, total


def _apply(rule: Rule, text: str) -> tuple[str, int]:
    count = 0

    def replace(match: re.Match[str]) -> str:
        nonlocal count
        group = "qsecret" if "qsecret" in match.re.groupindex and match.group("qsecret") is not None else "secret"
        secret = match.group(group)
        if secret is None or _keeps(secret):
            return match.group(0)
        count += 1
        start, end = match.span(group)
        offset = match.start()
        whole = match.group(0)
        return whole[: start - offset] + MARKER + whole[end - offset :]

    return rule.pattern.sub(replace, text), count


class Redactor:
    """Redacts many fields of one save and keeps the running count for ``meta.redactions``."""

    def __init__(self, scrub: Callable[[str], tuple[str, int]] = redact) -> None:
        self._scrub = scrub
        self.count = 0

    def __call__(self, text: str) -> str:
        """The redacted text; the number of replacements is added to ``count``."""
        cleaned, found = self._scrub(text)
        self.count += found
        return cleaned

    def optional(self, text: str | None) -> str | None:
        """Like calling the redactor, passing None through."""
        return None if text is None else self(text)
